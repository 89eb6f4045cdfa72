"""Facts about where a self-attention's keys and values come from (`model.kv`), in one
torch-free table: per-head projections of each token (multi-head, grouped-query and multi-query
attention, by model.n_kv_heads) or multi-head latent attention (MLA, DeepSeek-V2/V3): one
low-rank latent per token, expanded into every head's keys and values, with a decoupled RoPE key
shared by the heads. Each row says what it is, its paper, the `ModelConfig` fields it reads, its
parameters, FLOPs per token and KV-cache elements per position, and what it refuses.
`ModelConfig` runs `check_kv`; `zoo.config.schema.params`, `zoo.config.schema.flops` and
`zoo.models.limits` count from these rows; `zoo.nn.latent_attention` builds the latent kind;
`tests/config/facts/test_kv_table.py` keeps the rows and the built modules in step.

The latent kind follows transformers' `DeepseekV3Attention` (DeepSeek-AI 2024, "DeepSeek-V2",
§2.1). Shapes: D = d_model, H = n_heads, r = kv_lora_rank, r_q = q_lora_rank, d_n =
qk_nope_head_dim, d_r = qk_rope_head_dim, d_v = v_head_dim, d_qk = d_n + d_r:

- queries: W_q x (D -> H·d_qk), or with r_q, W_qb · norm(W_qa x) (D -> r_q -> H·d_qk);
- W_kva x (D -> r + d_r) splits into the latent c = norm(c') (r) and the shared key k_r (d_r);
- W_kvb c (r -> H·(d_n + d_v)) gives every head's k_n and v; a head's key is [k_n, k_r];
- RoPE (under model/position=rope) rotates the d_r query and key parts only, with
  model.position.theta over d_r dimensions; scores are scaled by 1/sqrt(d_qk)
  (model.attention_scale overrides it);
- W_o (H·d_v -> D).

The bias of model.bias sits where transformers' `attention_bias` puts it: on W_qa, W_kva and W_o
(W_q, W_qb and W_kvb have none). The two latent norms are model.norm_type's. A decoder with
cross-attention keeps per-head cross-attention (its keys are the encoder's, computed once).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.facts.blocks import QKNorm
from zoo.config.facts.norms import NORM_FACTS
from zoo.config.facts.positions import PositionKind

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig


class KVKind(Choice):
    heads = "heads"  # keys and values projected per head from each token (MHA; GQA/MQA by n_kv_heads)
    latent = "latent"  # multi-head latent attention: a low-rank latent per token (DeepSeek-V2/V3)


def _per_head_cache(cfg: ModelConfig) -> int:
    """K and V of each of the Hkv key/value heads: 2·Hkv·Dh."""
    return 2 * cfg.n_kv_heads * cfg.head_dim


def _per_head_scores(cfg: ModelConfig, keys: int) -> int:
    """q·kᵀ and weights·v over `keys` keys: 2·keys·H·Dh each."""
    return 4 * keys * cfg.n_heads * cfg.head_dim


@dataclass(frozen=True)
class LatentWidths:
    """The widths of a latent attention (`ModelConfig` under model.kv=latent, where
    `check_kv` has filled in those left out): r_q (None: one query projection), r, d_n, d_r, d_v."""

    q_rank: int | None
    rank: int
    nope: int
    rope: int
    v: int

    @property
    def qk(self) -> int:
        """d_qk = d_n + d_r, the width of a head's queries and keys."""
        return self.nope + self.rope


def latent_widths(cfg: ModelConfig) -> LatentWidths:
    """`cfg`'s latent widths (ValueError under model.kv=heads, where they are not set)."""
    widths = (cfg.kv_lora_rank, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim)
    if cfg.kv != KVKind.latent or any(w is None for w in widths):
        raise ValueError(f"model.kv={cfg.kv.value} has no latent widths")
    rank, nope, rope, v = (int(w) for w in widths if w is not None)
    return LatentWidths(cfg.q_lora_rank, rank, nope, rope, v)


def _latent_cache(cfg: ModelConfig) -> int:
    """The latent and the shared rotated key: r + d_r (not the expanded keys and values)."""
    w = latent_widths(cfg)
    return w.rank + w.rope


def _latent_scores(cfg: ModelConfig, keys: int) -> int:
    """q·kᵀ over d_qk and weights·v over d_v, for each of H heads over `keys` keys (the expanded
    form a forward without a cache runs)."""
    w = latent_widths(cfg)
    return 2 * keys * cfg.n_heads * (w.qk + w.v)


def _latent_matrices(cfg: ModelConfig) -> int:
    """The multiplies of one token (its own latent expanded once): W_q (or W_qa and W_qb), W_kva,
    W_kvb, W_o."""
    D, H, w = cfg.d_model, cfg.n_heads, latent_widths(cfg)
    queries = D * H * w.qk if w.q_rank is None else D * w.q_rank + w.q_rank * H * w.qk
    return queries + D * (w.rank + w.rope) + w.rank * H * (w.nope + w.v) + H * w.v * D


def _latent_parameters(cfg: ModelConfig) -> int:
    """The matrices of `_latent_matrices`, the biases of W_qa, W_kva and W_o (model.bias) and
    the norms of the query latent (r_q) and the key/value latent (r)."""
    norm, w = NORM_FACTS[cfg.norm_type].parameters, latent_widths(cfg)
    count = _latent_matrices(cfg) + norm(w.rank, cfg.bias)
    if w.q_rank is not None:
        count += norm(w.q_rank, cfg.bias)
    if cfg.bias:
        count += (w.q_rank or 0) + w.rank + w.rope + cfg.d_model
    return count


def _latent_flops(cfg: ModelConfig) -> int:
    """2 FLOPs per multiply-add of `_latent_matrices`."""
    return 2 * _latent_matrices(cfg)


@dataclass(frozen=True, kw_only=True)
class KVFacts:
    """One kind's row.

    - `what`: where a head's keys and values come from.
    - `paper`: where it comes from.
    - `params`: the `ModelConfig` fields it reads (`LATENT_PARAMS`); set under the other kind,
      refused.
    - `cache`: the KV-cache elements one position holds in one self-attention layer.
    - `scores`: the FLOPs of one query's scores and weighted values over a number of keys.
    - `parameters`, `flops`: one self-attention's parameters and projection FLOPs per token;
      None where `zoo.config.schema.params.attention_params` and
      `zoo.config.schema.flops.attention_projection_flops` count them (the per-head kind, which
      cross-attention shares).
    - `refuses`: what it will not combine with, each as the refusal says it.
    """

    what: str
    paper: str
    params: tuple[str, ...] = ()
    cache: Callable[[ModelConfig], int]
    scores: Callable[[ModelConfig, int], int]
    parameters: Callable[[ModelConfig], int] | None = None
    flops: Callable[[ModelConfig], int] | None = None
    refuses: tuple[str, ...] = ()


LATENT_PARAMS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")

KV_FACTS: dict[KVKind, KVFacts] = {
    KVKind.heads: KVFacts(
        what="each token's keys and values projected per head: n_kv_heads heads of head_dim, shared by "
        "n_heads / n_kv_heads query heads (multi-head; grouped-query; multi-query at 1)",
        paper="Vaswani et al. 2017; Shazeer 2019 (MQA); Ainslie et al. 2023 (GQA)",
        cache=_per_head_cache,
        scores=_per_head_scores,
    ),
    KVKind.latent: KVFacts(
        what="multi-head latent attention: each token's keys and values expanded per head from one "
        "kv_lora_rank latent, with a qk_rope_head_dim key shared by the heads that RoPE rotates "
        "(the decoupled key); queries through a q_lora_rank latent or one projection; the KV cache "
        "holds the latent and the shared key, kv_lora_rank + qk_rope_head_dim per position and layer",
        paper="DeepSeek-AI 2024 (DeepSeek-V2, §2.1); DeepSeek-AI 2024 (DeepSeek-V3)",
        params=LATENT_PARAMS,
        cache=_latent_cache,
        scores=_latent_scores,
        parameters=_latent_parameters,
        flops=_latent_flops,
        refuses=(
            "model.n_kv_heads other than model.n_heads (every head has its own keys from the latent)",
            "model.qk_norm (the latents have norms of their own)",
            "model/position=shaw (its offset tables are model.head_dim wide)",
            "model.parametrization=mup (its attention scale is defined on model.head_dim)",
            "an odd model.qk_rope_head_dim under model/position=rope (RoPE rotates pairs)",
        ),
    ),
}


def latent_defaults(head_dim: int) -> dict[str, int | None]:
    """The latent widths left out, from the head width Dh as DeepSeek-V2 sizes them (d_n = d_v =
    Dh, d_r = Dh / 2, r = 4·Dh; queries through one projection)."""
    return {
        "q_lora_rank": None,
        "kv_lora_rank": 4 * head_dim,
        "qk_nope_head_dim": head_dim,
        "qk_rope_head_dim": max(2, head_dim // 2 // 2 * 2),
        "v_head_dim": head_dim,
    }


def _positive(cfg: ModelConfig, name: str) -> None:
    value = getattr(cfg, name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"model.{name} must be a positive integer with model.kv=latent, got {value!r}")


def check_kv(cfg: ModelConfig, settle: Callable[[ModelConfig, str, object], None]) -> None:
    """Parse model.kv; refuse a latent width under the per-head kind; under latent fill in the
    widths left out (`latent_defaults`) with `settle`, and refuse the row's combinations."""
    settle(cfg, "kv", KVKind.parse(cfg.kv, "model.kv"))
    facts = KV_FACTS[cfg.kv]
    for name in LATENT_PARAMS:
        if name not in facts.params and getattr(cfg, name) is not None:
            raise ConfigError(
                f"model.{name}={getattr(cfg, name)!r} only applies to model.kv={KVKind.latent.value}, not {cfg.kv.value}"
            )
    if cfg.kv != KVKind.latent:
        return
    for name, value in latent_defaults(cfg.head_dim).items():
        if getattr(cfg, name) is None and value is not None:
            settle(cfg, name, value)
    for name in LATENT_PARAMS:
        if name != "q_lora_rank" or cfg.q_lora_rank is not None:
            _positive(cfg, name)
    latent = f"model.kv={KVKind.latent.value}"
    if cfg.n_kv_heads != cfg.n_heads:
        raise ConfigError(
            f"{latent} expands every head's keys and values from one latent: model.n_kv_heads="
            f"{cfg.n_kv_heads} must equal model.n_heads={cfg.n_heads} (or be left out)"
        )
    if cfg.qk_norm != QKNorm.none:
        raise ConfigError(f"{latent} takes no model.qk_norm={cfg.qk_norm.value}: its latents have norms of their own")
    kind = cfg.position.kind
    if kind == PositionKind.shaw:
        raise ConfigError(
            f"{latent} does not take model/position={kind.value}: its offset tables are model.head_dim wide"
        )
    if cfg.parametrization.value == "mup":
        raise ConfigError(
            f"{latent} does not take model.parametrization=mup: its attention scale is defined on model.head_dim"
        )
    if kind == PositionKind.rope and latent_widths(cfg).rope % 2:
        raise ConfigError(
            f"model.qk_rope_head_dim={cfg.qk_rope_head_dim} must be even with model/position=rope: RoPE rotates pairs"
        )
