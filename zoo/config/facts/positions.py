"""Facts about each position scheme, in one torch-free table: the `PositionConfig` parameters
it reads, where it acts, the size it needs even, whether `model.max_seq_len` bounds the
positions it can encode, how many parameters it holds and whether they count as embeddings. `PositionConfig` and `ModelConfig` check configs against these rows;
validation, sampling, the inference tools and zoo-compare ask `max_positions`. The schemes'
modules live in `zoo.nn.position`, one file each; `tests/config/facts/test_position_table.py` keeps
the two in step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.facts.rope import LAYER_PARAMS, SCALING_PARAMS
from zoo.config.facts.starts import Starts

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig, PositionConfig


class PositionKind(Choice):
    none = "none"
    sinusoidal = "sinusoidal"
    learned = "learned"
    relative = "relative"  # T5 bucketed bias
    shaw = "shaw"  # Shaw et al. 2018
    alibi = "alibi"
    rope = "rope"


class Site(Choice):
    """Where a scheme acts (the three places of DESIGN §5, and Shaw's value term), each the
    hook of `zoo.nn.position.base.PositionScheme` that carries it."""

    embeddings = "embeddings"  # added to the token embeddings (`embed`)
    scores = "scores"  # an additive bias on the attention scores (`attend`)
    rotation = "rotation"  # q and k rotated by their positions (`attend`)
    values = "values"  # a term added to the attention output (`value_term`)


@dataclass(frozen=True)
class Even:
    """A size the scheme needs even: `size` names the ModelConfig field, `refusal` is the
    error's wording, formatted with d_model, n_heads and head_dim."""

    size: str
    refusal: str


def _no_parameters(cfg: ModelConfig, n_layers: int) -> int:
    """Nothing learned (sinusoidal, ALiBi and RoPE hold buffers only)."""
    return 0


def _no_flops(cfg: ModelConfig) -> int:
    """No matrix multiply of its own (an addition to the embeddings or scores, a rotation)."""
    return 0


@dataclass(frozen=True)
class PositionFacts:
    """One scheme's row.

    - `params`: the `PositionConfig` fields it reads; setting another scheme's field away from
      its default is refused, so `model/position=alibi model.position.theta=5e5` does not
      silently do nothing.
    - `acts`: where it acts; empty for a scheme that adds nothing.
    - `even`: the size it pairs dimensions of, which must be even (None: no such size).
    - `bounded`: its positions end at `model.max_seq_len` (a table of that many rows); an
      unbounded scheme computes any position.
    - `layer_params`: the `PositionConfig` fields the stack reads to pick each layer's scheme
      (RoPE's per-layer pattern, `zoo.config.facts.rope`), refused like `params` elsewhere.
    - `paper`: where it comes from.
    - `parameters`: the parameters one stack's scheme holds (its instances in every layer, for
      a scheme not shared across layers), from the model config and the stack's layer count;
      buffers are not parameters. `zoo.config.schema.params` counts them without building a model.
    - `embedding`: its parameters count as embedding parameters, as a learned table of
      positions does (Kaplan et al. 2020), and are left out of the non-embedding count that
      `zoo.summarize` reports and `model.param_budget` sizes.
    - `flops`: the matrix-multiply FLOPs it adds for one query in one self-attention layer
      (`zoo.config.schema.flops` counts them into `flops_per_token`).
    - `starts`: how each parameter the scheme's module holds itself (not through an
      `nn.Embedding` or `nn.Linear`, which start as every table and matrix does) starts, by
      name (`zoo.config.facts.starts`); empty for a scheme with none.
    """

    params: tuple[str, ...]
    acts: tuple[Site, ...]
    paper: str
    layer_params: tuple[str, ...] = ()
    even: Even | None = None
    bounded: bool = False
    parameters: Callable[[ModelConfig, int], int] = _no_parameters
    embedding: bool = False
    flops: Callable[[ModelConfig], int] = _no_flops
    starts: Starts = field(default_factory=dict, compare=False)


def _learned(cfg: ModelConfig, n_layers: int) -> int:
    """A table of (max_seq_len + offset) × D per stack."""
    return (cfg.max_seq_len + cfg.position.offset) * cfg.d_model


def _relative(cfg: ModelConfig, n_layers: int) -> int:
    """T5's bias: one table of num_buckets × H per stack, shared by its layers."""
    return cfg.position.num_buckets * cfg.n_heads


def _shaw(cfg: ModelConfig, n_layers: int) -> int:
    """Shaw et al.: a^K and a^V, (2·clip + 1) × Dh each, per layer."""
    return n_layers * 2 * (2 * cfg.position.clip + 1) * cfg.head_dim


def _shaw_flops(cfg: ModelConfig) -> int:
    """q·a^Kᵀ over the 2·clip + 1 offsets and the offsets' weights · a^V: 2·(2·clip + 1)·H·Dh
    each."""
    return 4 * (2 * cfg.position.clip + 1) * cfg.n_heads * cfg.head_dim


POSITION_FACTS: dict[PositionKind, PositionFacts] = {
    PositionKind.none: PositionFacts(
        params=(),
        acts=(),
        paper="ablation baseline; causal masking alone leaks order (Haviv et al. 2022)",
    ),
    PositionKind.sinusoidal: PositionFacts(
        params=(),
        acts=(Site.embeddings,),
        paper="Vaswani et al. 2017, §3.5",
        even=Even("d_model", "sinusoidal positions pair sin/cos dimensions: d_model {d_model} must be even"),
    ),
    PositionKind.learned: PositionFacts(
        params=("offset",),
        acts=(Site.embeddings,),
        paper="Gehring et al. 2017; GPT, BERT; offset: BART (Lewis et al. 2020)",
        bounded=True,
        parameters=_learned,
        embedding=True,
    ),
    PositionKind.relative: PositionFacts(
        params=("num_buckets", "max_distance"),
        acts=(Site.scores,),
        paper="Raffel et al. 2020, §2.1 (T5)",
        parameters=_relative,
    ),
    PositionKind.shaw: PositionFacts(
        params=("clip",),
        acts=(Site.scores, Site.values),
        paper="Shaw et al. 2018",
        parameters=_shaw,
        flops=_shaw_flops,
    ),
    PositionKind.alibi: PositionFacts(
        params=(),
        acts=(Site.scores,),
        paper="Press et al. 2022",
    ),
    PositionKind.rope: PositionFacts(
        params=("theta", "scale", *SCALING_PARAMS, "rotary_fraction"),
        layer_params=LAYER_PARAMS,
        acts=(Site.rotation,),
        paper="Su et al. 2021 (RoFormer); scaling rules: zoo.config.facts.rope.SCALING_FACTS",
        even=Even(
            "head_dim",
            "rope rotates pairs of dimensions: head size {head_dim} "
            "(d_model {d_model} / n_heads {n_heads}) must be even",
        ),
    ),
}


def readers(param: str) -> tuple[PositionKind, ...]:
    """The schemes that read `PositionConfig` field `param` (empty for `kind`)."""
    return tuple(kind for kind, facts in POSITION_FACTS.items() if param in facts.params + facts.layer_params)


def check_params(position: PositionConfig) -> None:
    """Refuse a parameter set away from its default for a scheme that does not read it."""
    for f in fields(position):
        owners = readers(f.name)
        if owners and position.kind not in owners and getattr(position, f.name) != f.default:
            names = " or ".join(k.value for k in owners)
            raise ConfigError(
                f"model.position.{f.name} only applies to model/position={names}, not {position.kind.value}"
            )


def check_even(cfg: ModelConfig) -> None:
    """Refuse an odd size that `cfg`'s scheme pairs dimensions of."""
    even = POSITION_FACTS[cfg.position.kind].even
    if even is not None and getattr(cfg, even.size) % 2:
        raise ConfigError(even.refusal.format(d_model=cfg.d_model, n_heads=cfg.n_heads, head_dim=cfg.head_dim))


def max_positions(cfg: ModelConfig) -> int | None:
    """How many positions `cfg`'s scheme can encode: model.max_seq_len for a bounded scheme,
    None for one that extrapolates to any length."""
    return cfg.max_seq_len if POSITION_FACTS[cfg.position.kind].bounded else None


def extrapolating() -> tuple[PositionKind, ...]:
    """The schemes that encode positions past any length (bounded ones and `none` excluded)."""
    return tuple(kind for kind, facts in POSITION_FACTS.items() if facts.acts and not facts.bounded)
