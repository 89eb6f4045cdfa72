"""Facts about the block options, in torch-free tables: how a block joins its sub-layers
(`model.block`), the norm on queries and keys (`model.qk_norm`), and the checks of the
soft-caps (`model.attn_softcap`, `model.final_softcap`). Each row says what the kind computes,
where it comes from, the parameters it adds, its cost and what it refuses; `ModelConfig` runs
`check_block` before any weight exists, `zoo.config.schema.params` counts the parameters from
these rows, `zoo.nn.block` and `zoo.nn.attention` build them, and
`tests/config/facts/test_block_tables.py` keeps the rows and the built modules in step. The norm
placements (`model.norm`) have their table in `zoo.config.facts.placements`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zoo.config.choice import Choice, listed
from zoo.config.errors import ConfigError
from zoo.config.facts.placements import PLACEMENT_FACTS, NormPlacement

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig


class BlockKind(Choice):
    sequential = "sequential"  # x -> x + attn(...) -> x + ff(...): one sub-layer after the other
    parallel = "parallel"  # x + attn(n(x)) + ff(n(x)), one shared norm (GPT-J, PaLM)
    parallel_two_norms = "parallel_two_norms"  # x + attn(n1(x)) + ff(n2(x)) (GPT-NeoX)


class QKNorm(Choice):
    none = "none"
    head = "head"  # a norm over each head's Dh of the queries and of the keys (Qwen3)
    projection = "projection"  # a norm over the whole H·Dh queries and Hkv·Dh keys (OLMo 2)


def _refuses_nothing(cfg: ModelConfig) -> str | None:
    """Valid with every family, position scheme and norm placement."""
    return None


def _parallel_two_norms(cfg: ModelConfig) -> str | None:
    if PLACEMENT_FACTS[cfg.norm].normalizes_stream:
        return (
            f"model.block={BlockKind.parallel_two_norms.value} gives each branch its own norm, but model.norm="
            f"{cfg.norm.value} normalizes the residual stream after the branches add: use "
            f"model.block={BlockKind.parallel.value} (one norm of the sum) or model.norm="
            f"{listed(k.value for k, row in PLACEMENT_FACTS.items() if not row.normalizes_stream)}"
        )
    return None


@dataclass(frozen=True, kw_only=True)
class BlockFacts:
    """One block kind's row.

    - `what`: what a block computes from the residual stream x (pre-LN written out; see
      `placements` for the other norm placements).
    - `paper`: where it comes from.
    - `parallel`: its sub-layers all read the block's input and their outputs add to one
      residual, instead of each reading the previous one's output. In an encoder-decoder's
      decoder the cross-attention is a third branch like the other two.
    - `shared_norms`: the branches share one set of norms (one placement's worth per block,
      the output norm of sandwich and reordered applied to the branches' sum); otherwise each
      sub-layer has its own.
    - `placements`: how each norm placement reads with this kind.
    - `parameters`: what it adds or removes against sequential.
    - `flops`: its matrix-multiply FLOPs against sequential.
    - `refuses`: the one-line refusal of a model config it cannot serve, None where it serves it.
    """

    what: str
    paper: str
    parallel: bool
    shared_norms: bool
    placements: str
    parameters: str
    flops: str = "as sequential: the same matrix multiplies"
    refuses: Callable[[ModelConfig], str | None] = _refuses_nothing


BLOCK_FACTS: dict[BlockKind, BlockFacts] = {
    BlockKind.sequential: BlockFacts(
        what="h = x + attn(n1(x)); out = h + ff(n2(h)) (cross-attention between them in a decoder with an encoder)",
        paper="Vaswani et al. 2017",
        parallel=False,
        shared_norms=False,
        placements="each sub-layer wrapped by model.norm's placement in turn",
        parameters="the norms of model.norm's placement around every sub-layer",
    ),
    BlockKind.parallel: BlockFacts(
        what="x + attn(n(x)) + ff(n(x)): both branches read one shared norm of x",
        paper="Wang & Komatsuzaki 2021 (GPT-J); Chowdhery et al. 2022 (PaLM)",
        parallel=True,
        shared_norms=True,
        placements="pre: x + Σ f(n(x)); post: n(x + Σ f(x)); sandwich: x + n_out(Σ f(n_in(x))); "
        "reordered: x + n(Σ f(x))",
        parameters="one placement's norms per block instead of one per sub-layer",
    ),
    BlockKind.parallel_two_norms: BlockFacts(
        what="x + attn(n1(x)) + ff(n2(x)): each branch its own norm",
        paper="Black et al. 2022 (GPT-NeoX-20B, use_parallel_residual)",
        parallel=True,
        shared_norms=False,
        placements="pre: x + Σ f_i(n_i(x)); sandwich: x + Σ n_out,i(f_i(n_in,i(x))); reordered: "
        "x + Σ n_i(f_i(x)); post refused (its norm is of the sum)",
        parameters="as sequential",
        refuses=_parallel_two_norms,
    ),
}


def _no_widths(cfg: ModelConfig) -> tuple[int, ...]:
    return ()


@dataclass(frozen=True, kw_only=True)
class QKNormFacts:
    """One QK-norm kind's row.

    - `what`: what is normalized; always before the position scheme's rotation (RoPE) and
      before the keys enter the KV cache. Cross-attention normalizes its queries and the keys
      of the encoder memory alike, with norms of its own.
    - `paper`: where it comes from.
    - `widths`: the widths of the norms one attention holds (queries first, then keys); each
      holds the parameters of `model.qk_norm_type`'s row (default `model.norm_type`) at that width.
    - `flops`: its elementwise cost per token and attention (no matrix multiply).
    """

    what: str
    paper: str
    widths: Callable[[ModelConfig], tuple[int, ...]]
    flops: str


QK_NORM_FACTS: dict[QKNorm, QKNormFacts] = {
    QKNorm.none: QKNormFacts(
        what="queries and keys as projected",
        paper="Vaswani et al. 2017",
        widths=_no_widths,
        flops="none",
    ),
    QKNorm.head: QKNormFacts(
        what="each head's query and key vectors normalized over their Dh; one norm for every "
        "query head, one for every key head",
        paper="Henry et al. 2020; Dehghani et al. 2023 (ViT-22B); Qwen3 (2025)",
        widths=lambda cfg: (cfg.head_dim, cfg.head_dim),
        flops="one norm over Dh per query head and per key head: (H + Hkv)·Dh elements",
    ),
    QKNorm.projection: QKNormFacts(
        what="the whole query projection normalized over its H·Dh, the key projection over its Hkv·Dh",
        paper="OLMo Team 2024 (2 OLMo 2 Furious)",
        widths=lambda cfg: (cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim),
        flops="one norm over H·Dh and one over Hkv·Dh: (H + Hkv)·Dh elements",
    ),
}


SOFTCAPS = {
    "attn_softcap": "attention scores: c·tanh(s/c) after the scale q·kᵀ·scale, before the "
    "position bias and the mask (Gemma 2); the attention runs its math path, "
    "not SDPA's fused kernels",
    "final_softcap": "output logits: c·tanh(z/c) wherever logits are made: the training loss "
    "(logits and chunked), validation, generation (Gemma 2)",
}


def check_softcap(name: str, value) -> float | None:
    """A soft-cap is null (off) or a finite number > 0; returns it as a float."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"model.{name} must be a number > 0 (or null: no cap), got {value!r}")
    return float(value)


def check_block(cfg: ModelConfig) -> None:
    """Refuse, on one line, a block option `cfg` cannot have (before any weight exists); the
    schema reads its soft-caps with `check_softcap`."""
    refusal = BLOCK_FACTS[cfg.block].refuses(cfg)
    if refusal is not None:
        raise ConfigError(refusal)
    if cfg.qk_norm == QKNorm.none and cfg.qk_norm_type is not None:
        raise ConfigError(
            f"model.qk_norm_type={cfg.qk_norm_type.value} only applies with model.qk_norm="
            f"{listed(k.value for k in QKNorm if k != QKNorm.none)}, not {QKNorm.none.value}"
        )


def norms_per_block(cfg: ModelConfig, sublayers: int) -> int:
    """The norms over D in one block of `sublayers` sub-layers (2, or 3 with cross-attention)."""
    per_set = PLACEMENT_FACTS[cfg.norm].norms_per_sublayer
    return per_set * (1 if BLOCK_FACTS[cfg.block].shared_norms else sublayers)


def non_default_block_options(cfg: ModelConfig) -> list[str]:
    """The block options of `cfg` away from today's block, as `key=value`: what a peer that maps
    only the sequential pre/post block without QK-norm or soft-caps must refuse (never drop)."""
    out = []
    if cfg.norm not in (NormPlacement.pre, NormPlacement.post):
        out.append(f"model.norm={cfg.norm.value}")
    if cfg.block != BlockKind.sequential:
        out.append(f"model.block={cfg.block.value}")
    if cfg.qk_norm != QKNorm.none:
        out.append(f"model.qk_norm={cfg.qk_norm.value}")
    for name in ("attn_softcap", "final_softcap"):
        if getattr(cfg, name) is not None:
            out.append(f"model.{name}={getattr(cfg, name):g}")
    if cfg.layer_pattern is not None:  # each layer's kind (zoo.config.facts.attention), not model.attention's
        out.append(f"model.layer_pattern=[{','.join(cfg.layer_pattern)}]")
    return out
