"""x-transformers (Phil Wang) as a peer: a `TransformerWrapper` + `Decoder` with the workload's
shapes (width, depth, heads, key/value heads, feed-forward width, positions, norm, activation,
tied embeddings), SDPA attention (`attn_flash`), trained on the cross-entropy of its logits as
its `AutoregressiveWrapper` does, generating with `AutoregressiveWrapper.generate` (KV cache).
Decoder-only models only."""

from __future__ import annotations

import torch

from zoo.bench.peers.logits_lm import LogitsLMPeer
from zoo.bench.peers.mapped import refuse_unmapped
from zoo.bench.peers.unavailable import PeerUnavailable
from zoo.bench.workload import Workload
from zoo.config.facts.blocks import non_default_block_options
from zoo.config.facts.residuals import non_default_residual_options
from zoo.config.schema.model import Activation, Family, FFNKind, NormPlacement, NormType, PositionKind

POSITIONS = {
    PositionKind.learned: {},
    PositionKind.none: {"use_abs_pos_emb": False},
    PositionKind.rope: {"use_abs_pos_emb": False, "rotary_pos_emb": True},
    PositionKind.alibi: {"use_abs_pos_emb": False, "alibi_pos_bias": True},
}
ACTIVATIONS = {
    Activation.gelu: {},
    Activation.swiglu: {"ff_glu": True, "ff_swish": True},
    Activation.geglu: {"ff_glu": True},
}
NORMS = {NormType.layernorm: {}, NormType.rmsnorm: {"use_rmsnorm": True}}
PLACEMENTS = {NormPlacement.pre: {"pre_norm": True}, NormPlacement.post: {"pre_norm": False}}
MAPPED = {  # config key -> the kinds x-transformers has an equivalent of (zoo.bench.peers.mapped)
    "model.family": (Family.decoder_only,),
    "model.norm": tuple(PLACEMENTS),
    "model.position.kind": tuple(POSITIONS),
    "model.norm_type": tuple(NORMS),
    "model.activation": tuple(ACTIVATIONS),
    "model.ffn": (FFNKind.dense,),
}


def decoder_kwargs(work: Workload) -> tuple[dict, dict]:
    """(TransformerWrapper keyword arguments, Decoder keyword arguments) for the workload's
    model, or PeerUnavailable naming what has no equivalent."""
    cfg = work.model
    if cfg.family != Family.decoder_only:
        raise PeerUnavailable(f"compared on decoder-only models only, not {cfg.family.value}")
    if cfg.position.kind not in POSITIONS:
        raise PeerUnavailable(f"position {cfg.position.kind.value} is not mapped")
    refuse_unmapped(cfg, MAPPED, "x-transformers")
    unmapped = non_default_block_options(cfg) + non_default_residual_options(cfg)  # the soft-caps, value_embeds
    if unmapped:  # options that are no axis of kinds
        raise PeerUnavailable(f"x-transformers has no equivalent of {', '.join(unmapped)}")
    wrapper = {
        "num_tokens": cfg.vocab_size,
        "max_seq_len": cfg.max_seq_len,
        "tie_embedding": cfg.tie_embeddings,
        "emb_dropout": cfg.dropout,
        **{k: v for k, v in POSITIONS[cfg.position.kind].items() if k == "use_abs_pos_emb"},
    }
    layers = {
        "dim": cfg.d_model,
        "depth": cfg.n_layers,
        "heads": cfg.n_heads,
        "attn_dim_head": cfg.head_dim,
        "attn_kv_heads": cfg.n_kv_heads,
        "attn_flash": True,
        "attn_dropout": cfg.dropout,
        "ff_dropout": cfg.dropout,
        "ff_mult": cfg.d_ff / cfg.d_model,
        "ff_no_bias": not cfg.bias,
        **PLACEMENTS[cfg.norm],
        **NORMS[cfg.norm_type],
        **{k: v for k, v in POSITIONS[cfg.position.kind].items() if k != "use_abs_pos_emb"},
        **ACTIVATIONS[cfg.activation],
    }
    if cfg.position.kind == PositionKind.alibi:
        layers["alibi_num_heads"] = cfg.n_heads
    return wrapper, layers


class XTransformersSubject(LogitsLMPeer):
    def __init__(self, work: Workload, *, zoo_model=None, compile: bool = False) -> None:
        try:
            from x_transformers import AutoregressiveWrapper, Decoder, TransformerWrapper
        except ImportError:
            raise PeerUnavailable(
                "x-transformers is not installed (pip install '.[bench]' in zoo's source directory)"
            ) from None
        wrapper, layers = decoder_kwargs(work)
        self.name, self.work = "x-transformers", work
        self.model = TransformerWrapper(**wrapper, attn_layers=Decoder(**layers)).to(work.device)
        self.ready(compile)
        self.sampler = AutoregressiveWrapper(self.decoder)

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor | None:
        self.decoder.eval()
        with self.work.autocast():
            return self.sampler.generate(prompt, new_tokens, temperature=0.0, cache_kv=True)
