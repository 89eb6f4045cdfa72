"""gpt-fast-style decoding as a peer: the plain PyTorch decoder that gpt-fast (PyTorch Labs)
writes to reach the memory-bandwidth limit at batch 1, with zoo's weights, so it computes zoo's
function. What makes it that style, as gpt-fast's `model.py` and `generate.py` do it:

- a static key/value cache per layer, allocated once for the longest sequence (B, Hkv, S, Dh)
  and written in place at the step's positions (`index_copy_`), so every step has one shape;
- attention over the whole cache with a boolean row of a precomputed causal mask (the row of
  the step's position), keys and values repeated over the query groups;
- one function `decode_one_token` (the forward of one token and its greedy choice) compiled
  with `mode="reduce-overhead", fullgraph=True` (CUDA graphs on a GPU), run under SDPA's math
  backend so inductor writes the attention itself; the prefill run eagerly (gpt-fast's default:
  `--compile_prefill` off);
- no host synchronisation in the loop: the token stays on the device, positions advance as a
  device tensor, the tokens are joined once at the end.

It maps decoder-only pre-norm models with RoPE (rotate-half, zoo's pairing; linear scaling), learned or no
positions, LayerNorm or RMSNorm, SwiGLU or a two-matrix MLP, full or grouped heads, with or
without biases and tied embeddings (GPT-2 small and Llama-style models); every other kind of an
axis and every non-default option of the block is refused by name. Greedy decoding only (the
bench decodes greedily). It decodes with a copy of the weights of its own, in bfloat16 in the
bf16 variants (gpt-fast's weights and caches are bf16; every system here decodes so there),
uncompiled but for the decoding step; its training step and forward are those of its `model`,
float32 weights under the variant's autocast, like the other peers'. gpt-fast itself is no
package; this is its design, written here."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from zoo.bench.peers.logits_lm import LogitsLMPeer
from zoo.bench.peers.mapped import refuse_unmapped
from zoo.bench.peers.unavailable import PeerUnavailable
from zoo.bench.workload import Workload
from zoo.config.facts.blocks import non_default_block_options
from zoo.config.facts.residuals import non_default_residual_options
from zoo.config.schema.model import Activation, Family, FFNKind, ModelConfig, NormPlacement, NormType, PositionKind

ACTIVATIONS = {Activation.swiglu: None, Activation.gelu: "none", Activation.gelu_tanh: "tanh", Activation.relu: None}
POSITIONS = (PositionKind.rope, PositionKind.learned, PositionKind.none)
MAPPED = {  # config key -> the kinds this peer has (zoo.bench.peers.mapped)
    "model.family": (Family.decoder_only,),
    "model.norm": (NormPlacement.pre,),
    "model.position.kind": POSITIONS,
    "model.norm_type": (NormType.layernorm, NormType.rmsnorm),
    "model.activation": tuple(ACTIVATIONS),
    "model.ffn": (FFNKind.dense,),
}
# options outside the axes that change the function; each must be at its default here
PLAIN = (
    "scale_embeddings",
    "embed_norm",
    "token_types",
    "attention_scale",
    "head_transform",
    "scale_output",
    "output_bias",
    "parametrization",
)
POSITION_PLAIN = ("rotary_fraction", "offset")  # (RoPE's linear scale is mapped: positions / scale)


def check(cfg: ModelConfig) -> None:
    """PeerUnavailable naming what of `cfg` this peer has no equivalent of."""
    if cfg.family != Family.decoder_only:
        raise PeerUnavailable(f"gpt-fast-style decoding is of decoder-only models, not {cfg.family.value}")
    refuse_unmapped(cfg, MAPPED, "gpt-fast-style decoding")
    default = ModelConfig()
    unmapped = non_default_block_options(cfg) + non_default_residual_options(cfg)
    unmapped += [f"model.{name}={getattr(cfg, name)}" for name in PLAIN if getattr(cfg, name) != getattr(default, name)]
    unmapped += [
        f"model.position.{name}={getattr(cfg.position, name)}"
        for name in POSITION_PLAIN
        if hasattr(cfg.position, name) and getattr(cfg.position, name) != getattr(default.position, name)
    ]
    if unmapped:
        raise PeerUnavailable(f"gpt-fast-style decoding has no equivalent of {', '.join(unmapped)}")


class KVCache(nn.Module):
    """One layer's keys and values for `S` positions, written in place at the step's positions."""

    k_cache: torch.Tensor  # (B, Hkv, S, Dh) buffers
    v_cache: torch.Tensor

    def __init__(self, B: int, Hkv: int, S: int, Dh: int, dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(B, Hkv, S, Dh, dtype=dtype, device=device), persistent=False)
        self.register_buffer("v_cache", torch.zeros(B, Hkv, S, Dh, dtype=dtype, device=device), persistent=False)

    def update(self, input_pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """k, v (B, Hkv, T, Dh) at positions input_pos (T,) -> the whole cache (B, Hkv, S, Dh) twice."""
        self.k_cache.index_copy_(2, input_pos, k.to(self.k_cache.dtype))
        self.v_cache.index_copy_(2, input_pos, v.to(self.v_cache.dtype))
        return self.k_cache, self.v_cache


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.H, self.Hkv, self.Dh = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.wqkv = nn.Linear(cfg.d_model, (self.H + 2 * self.Hkv) * self.Dh, bias=cfg.bias)
        self.wo = nn.Linear(self.H * self.Dh, cfg.d_model, bias=cfg.bias)
        self.kv_cache: KVCache | None = None

    def forward(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None, mask: torch.Tensor | None, input_pos
    ) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = self.wqkv(x).split([self.H * self.Dh, self.Hkv * self.Dh, self.Hkv * self.Dh], dim=-1)
        q = q.view(B, T, self.H, self.Dh).transpose(1, 2)  # (B, H, T, Dh)
        k = k.view(B, T, self.Hkv, self.Dh).transpose(1, 2)  # (B, Hkv, T, Dh)
        v = v.view(B, T, self.Hkv, self.Dh).transpose(1, 2)  # (B, Hkv, T, Dh)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if self.kv_cache is not None:
            k, v = self.kv_cache.update(input_pos, k, v)  # (B, Hkv, S, Dh)
        k = k.repeat_interleave(self.H // self.Hkv, dim=1)  # (B, H, S, Dh)
        v = v.repeat_interleave(self.H // self.Hkv, dim=1)  # (B, H, S, Dh)
        if mask is None:  # no cache: the causal square
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, Dh)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, T, Dh)
        return self.wo(y.transpose(1, 2).reshape(B, T, self.H * self.Dh))  # (B, T, D)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, T, Dh) rotated by cos, sin (T, Dh): rotate-half pairing (i with i + Dh/2)."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class FeedForward(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.gated = cfg.activation == Activation.swiglu
        self.w_in = nn.Linear(cfg.d_model, (2 if self.gated else 1) * cfg.d_ff, bias=cfg.bias)
        self.w_out = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)
        self.approximate = ACTIVATIONS[cfg.activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.w_in(x)  # (B, T, F) or gate and up (B, T, 2F)
        if self.gated:
            gate, up = h.chunk(2, dim=-1)
            h = F.silu(gate) * up
        elif self.approximate is None:
            h = F.relu(h)
        else:
            h = F.gelu(h, approximate=self.approximate)
        return self.w_out(h)


def norm(cfg: ModelConfig) -> nn.Module:
    if cfg.norm_type == NormType.rmsnorm:
        return nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
    return nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attention_norm, self.attention = norm(cfg), Attention(cfg)
        self.ffn_norm, self.feed_forward = norm(cfg), FeedForward(cfg)

    def forward(self, x, rope, mask, input_pos) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), rope, mask, input_pos)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    """The decoder; `setup_caches` gives it static caches, and then `forward(idx, input_pos)`
    reads and writes them at `input_pos`."""

    rope_cos: torch.Tensor  # (S, Dh) buffers, with RoPE
    rope_sin: torch.Tensor

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.d_model)
        learned = cfg.position.kind == PositionKind.learned
        self.wpe = nn.Embedding(cfg.max_seq_len, cfg.d_model) if learned else None
        self.blocks = [Block(cfg) for _ in range(cfg.n_layers)]
        self.layers = nn.ModuleList(self.blocks)
        self.norm = norm(cfg)
        self.output = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.output.weight = self.tok_embeddings.weight
        self.caches: dict[int, list[KVCache]] = {}  # batch size -> a cache per layer
        self.causal_mask: torch.Tensor | None = None
        self.rope = cfg.position.kind == PositionKind.rope
        if self.rope:
            self._rope_table(cfg.max_seq_len, torch.device("cpu"))

    def _rope_table(self, S: int, device: torch.device) -> None:
        """cos and sin (S, Dh) of every position, as buffers (they move with the model)."""
        Dh = self.cfg.head_dim
        inv_freq = 1.0 / (self.cfg.position.theta ** (torch.arange(0, Dh, 2, dtype=torch.float32, device=device) / Dh))
        positions = torch.arange(S, dtype=torch.float32, device=device) / self.cfg.position.scale  # linear scaling
        angles = torch.outer(positions, inv_freq)  # (S, Dh/2)
        angles = torch.cat((angles, angles), dim=-1)  # (S, Dh)
        self.register_buffer("rope_cos", angles.cos(), persistent=False)
        self.register_buffer("rope_sin", angles.sin(), persistent=False)

    def setup_caches(self, B: int, S: int) -> None:
        """Static caches for `B` rows of up to `S` positions. As gpt-fast, they are kept while
        long enough; one set is kept per batch size, so that calls at batch 1 and at a larger
        batch in turn allocate nothing new (and a compiled step finds the shapes it has seen)."""
        held = self.caches.get(B)
        if held is None or held[0].k_cache.shape[2] < S:
            device, dtype = self.output.weight.device, self.output.weight.dtype
            Hkv, Dh = self.cfg.n_kv_heads, self.cfg.head_dim
            held = [KVCache(B, Hkv, S, Dh, dtype, device) for _ in self.blocks]
            self.caches[B] = held
        S = held[0].k_cache.shape[2]
        for layer, cache in zip(self.blocks, held, strict=True):
            layer.attention.kv_cache = cache
        if self.causal_mask is None or self.causal_mask.shape[0] != S:
            self.causal_mask = torch.tril(
                torch.ones(S, S, dtype=torch.bool, device=self.output.weight.device)
            )  # (S, S)
        if self.rope and self.rope_cos.shape[0] < S:
            self._rope_table(S, self.output.weight.device)

    def forward(self, idx: torch.Tensor, input_pos: torch.Tensor | None = None) -> torch.Tensor:
        """idx (B, T) at positions input_pos (T,) (None: 0..T-1, no cache) -> logits (B, T, V)."""
        T = idx.shape[1]
        pos = torch.arange(T, device=idx.device) if input_pos is None else input_pos
        mask = None
        if input_pos is not None:
            assert self.causal_mask is not None, "setup_caches first"
            mask = self.causal_mask[None, None, input_pos]  # (1, 1, T, S)
        x = self.tok_embeddings(idx)  # (B, T, D)
        if self.wpe is not None:
            x = x + self.wpe(pos)
        rope = (self.rope_cos[pos].to(x.dtype), self.rope_sin[pos].to(x.dtype)) if self.rope else None  # (T, Dh)
        for layer in self.blocks:
            x = layer(x, rope, mask, input_pos)
        return self.output(self.norm(x))  # (B, T, V)


def from_zoo(cfg: ModelConfig, state: dict[str, torch.Tensor]) -> Transformer:
    """The gpt-fast-style decoder holding zoo's weights (`state`: a zoo decoder's state dict)."""
    model = Transformer(cfg)
    names = {
        "tok_embeddings.weight": "embed.weight",
        "output.weight": "lm_head.weight",
        "norm.weight": "decoder.final_norm.weight",
        "norm.bias": "decoder.final_norm.bias",
        "wpe.weight": "decoder.positions.0.table.weight",
    }
    layer = {
        "attention.wqkv": "self_attn.qkv_proj",
        "attention.wo": "self_attn.o_proj",
        "feed_forward.w_in": "ff.w_in",
        "feed_forward.w_out": "ff.w_out",
        "attention_norm": "self_attn_sub.norm",
        "ffn_norm": "ff_sub.norm",
    }
    for i in range(cfg.n_layers):
        for ours, theirs in layer.items():
            for suffix in ("weight", "bias"):
                names[f"layers.{i}.{ours}.{suffix}"] = f"decoder.layers.{i}.{theirs}.{suffix}"
    wanted = model.state_dict()
    loaded = {}
    for key in wanted:
        source = names.get(key)
        if source is None or source not in state:
            raise PeerUnavailable(f"gpt-fast-style decoding found no zoo weight for {key}")
        loaded[key] = state[source]
    model.load_state_dict(loaded)
    return model


def decode_one_token(model: Transformer, token: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
    """token (B, 1) at input_pos (1,) -> the next greedy token (B, 1), as a device tensor."""
    logits = model(token, input_pos)  # (B, 1, V)
    return logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)


class GptFastSubject(LogitsLMPeer):
    model: Any
    decoder: Any  # its Transformer (setup_caches)

    def __init__(self, work: Workload, *, zoo_model, compile: bool = False) -> None:
        check(work.model)
        self.work = work
        self.name = "gpt-fast-style"
        state = zoo_model.state_dict()
        self.model = from_zoo(work.model, state).to(work.device)
        dtype = torch.bfloat16 if work.bf16 else None
        self.step = decode_one_token
        if compile:
            self.step = torch.compile(decode_one_token, mode="reduce-overhead", fullgraph=True)
        # decodes with a copy of its own, never compiled whole: only its one-token step is
        self.ready(compile, decoder=from_zoo(work.model, state).to(work.device, dtype=dtype))

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor | None:
        """Greedy decoding: the prompt's prefill, then one compiled step a token, nothing read
        back to the host before the end."""
        decoder = self.decoder.eval()
        B, T = prompt.shape
        device = prompt.device
        decoder.setup_caches(B, T + new_tokens)
        logits = decoder(prompt, torch.arange(T, device=device))  # (B, T, V): the prefill
        token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
        out = [token]
        input_pos = torch.tensor([T], device=device)  # (1,)
        with sdpa_kernel(SDPBackend.MATH):
            for _ in range(new_tokens - 1):
                token = self.step(decoder, token, input_pos).clone()  # (B, 1): a graph's output is reused
                out.append(token)
                input_pos += 1
        return torch.cat(out, dim=1)  # (B, new_tokens)
