"""litgpt (Lightning AI) as a peer: its `GPT` built from a `Config` with the workload's shapes
(width, depth, heads, key/value groups, head size, feed-forward width and kind, norm, bias,
tied embeddings), sequential residuals, trained on the cross-entropy of its logits as litgpt's
pretraining script does, generating greedily through its KV cache (`set_kv_cache`, `input_pos`),
as `litgpt.generate` does. Decoder-only pre-norm models only. litgpt has RoPE in every model:
for learned or absent positions it runs RoPE (the same matmuls; a few elementwise operations
more), and its name in the report says so.

litgpt pins an older huggingface-hub than transformers needs, so it is installed beside them
without its dependencies: `pip install --no-deps litgpt psutil`."""

from __future__ import annotations

from typing import Any

import torch

from zoo.bench.peers.logits_lm import LogitsLMPeer
from zoo.bench.peers.mapped import refuse_unmapped
from zoo.bench.peers.unavailable import PeerUnavailable
from zoo.bench.workload import Workload
from zoo.config.facts.blocks import non_default_block_options
from zoo.config.facts.residuals import non_default_residual_options
from zoo.config.schema.model import Activation, Family, FFNKind, NormPlacement, NormType, PositionKind

MLPS = {  # zoo activation -> (litgpt MLP class, its GELU approximation)
    Activation.gelu: ("GptNeoxMLP", "none"),
    Activation.gelu_tanh: ("GptNeoxMLP", "tanh"),
    Activation.swiglu: ("LLaMAMLP", "none"),
    Activation.geglu: ("GemmaMLP", "none"),
    Activation.geglu_tanh: ("GemmaMLP", "tanh"),
}
ROPE = (PositionKind.rope, PositionKind.learned, PositionKind.none)
NORMS = {NormType.layernorm: "LayerNorm", NormType.rmsnorm: "RMSNorm"}  # zoo norm type -> litgpt norm_class_name
MAPPED = {  # config key -> the kinds litgpt has an equivalent of (zoo.bench.peers.mapped)
    "model.family": (Family.decoder_only,),
    "model.norm": (NormPlacement.pre,),
    "model.position.kind": ROPE,
    "model.norm_type": tuple(NORMS),
    "model.activation": tuple(MLPS),
    "model.ffn": (FFNKind.dense,),
}
INSTALL = "pip install --no-deps litgpt psutil"


def config_kwargs(work: Workload) -> dict:
    """litgpt `Config` keyword arguments for the workload's model, or PeerUnavailable naming
    what has no equivalent."""
    cfg = work.model
    if cfg.family != Family.decoder_only:
        raise PeerUnavailable(f"compared on decoder-only models only, not {cfg.family.value}")
    if cfg.norm != NormPlacement.pre:
        raise PeerUnavailable(f"litgpt's blocks are pre-norm only, not model.norm={cfg.norm.value}")
    if cfg.position.kind not in ROPE:
        raise PeerUnavailable(f"litgpt has RoPE only, not {cfg.position.kind.value}")
    refuse_unmapped(cfg, MAPPED, "litgpt")
    unmapped = non_default_block_options(cfg) + non_default_residual_options(cfg)  # the soft-caps, value_embeds
    if unmapped:  # options that are no axis of kinds
        raise PeerUnavailable(f"litgpt has no equivalent of {', '.join(unmapped)}")
    mlp, approximate = MLPS[cfg.activation]
    return dict(
        name="zoo-workload",
        block_size=cfg.max_seq_len,
        vocab_size=cfg.vocab_size,
        padded_vocab_size=cfg.vocab_size,
        n_layer=cfg.n_layers,
        n_head=cfg.n_heads,
        n_embd=cfg.d_model,
        head_size=cfg.head_dim,
        n_query_groups=cfg.n_kv_heads,
        rotary_percentage=1.0,
        parallel_residual=False,
        bias=cfg.bias,
        attn_bias=cfg.bias,
        norm_class_name=NORMS[cfg.norm_type],
        norm_eps=cfg.norm_eps,
        mlp_class_name=mlp,
        gelu_approximate=approximate,
        intermediate_size=cfg.d_ff,
    )


class LitGPTSubject(LogitsLMPeer):
    model: Any  # litgpt's GPT: the package ships no types (its KV-cache methods are its own)
    decoder: Any

    def __init__(self, work: Workload, *, zoo_model=None, compile: bool = False) -> None:
        try:
            from litgpt.config import Config
            from litgpt.model import GPT
        except ImportError:
            raise PeerUnavailable(f"litgpt is not installed ({INSTALL})") from None
        kwargs = config_kwargs(work)
        self.work = work
        rope_note = "" if work.model.position.kind == PositionKind.rope else " (RoPE)"
        self.name = f"litgpt GPT{rope_note}"
        self.model = GPT(Config(**kwargs)).to(work.device)
        self.model.apply(self.model._init_weights)
        if work.model.tie_embeddings:
            self.model.lm_head.weight = self.model.transformer.wte.weight
        self.ready(compile)

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor | None:
        self.decoder.eval()
        B, T = prompt.shape
        self.decoder.set_kv_cache(
            batch_size=B,
            max_seq_length=T + new_tokens,
            device=prompt.device,
            dtype=torch.bfloat16 if self.work.bf16 else None,
        )
        out = []
        with self.work.autocast():
            logits = self.decoder(prompt, input_pos=torch.arange(T, device=prompt.device))  # (B, T, V)
            for step in range(new_tokens):
                token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
                out.append(token)
                if step + 1 < new_tokens:
                    logits = self.decoder(token, input_pos=torch.tensor([T + step], device=prompt.device))  # (B, 1, V)
        self.decoder.clear_kv_cache()
        return torch.cat(out, dim=1)  # (B, new_tokens)
