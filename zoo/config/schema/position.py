"""Typed schema of a model's position scheme (`model.position`): the scheme's kind and its
parameters, checked before any weight exists. Nothing here imports torch."""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.config.choice import listed
from zoo.config.errors import ConfigError
from zoo.config.facts.positions import PositionKind, check_params
from zoo.config.facts.rope import SCALING_FACTS, RopeScaling, check_scaling
from zoo.config.schema.frozen import settle


@dataclass(kw_only=True, frozen=True)
class PositionConfig:
    """How token order enters the model: `kind` picks a scheme, the rest are its parameters
    (which scheme reads which: `zoo.config.facts.positions.POSITION_FACTS`)."""

    kind: PositionKind = field(default=PositionKind.learned, metadata={"help": "position scheme"})
    theta: float = field(default=10000.0, metadata={"help": "rope: frequency base"})
    scale: float = field(
        default=1.0,
        metadata={
            "help": "rope: the context-extension factor of model.position.scaling (linear: positions "
            "are divided by it, Chen et al. 2023); 1: none"
        },
    )
    num_buckets: int = field(default=32, metadata={"help": "relative: number of buckets"})
    max_distance: int = field(default=128, metadata={"help": "relative: offsets beyond this share the last bucket"})
    clip: int = field(default=16, metadata={"help": "shaw: relative offsets are clipped to ±clip"})
    offset: int = field(
        default=0,
        metadata={
            "help": "learned: rows of the table before position 0 (position p reads row "
            "p + offset; BART: 2); the table has max_seq_len + offset rows"
        },
    )

    # RoPE's context-extension rule (zoo.config.facts.rope.SCALING_FACTS)
    scaling: RopeScaling = field(
        default=RopeScaling.linear,
        metadata={
            "help": f"rope: the context-extension rule that stretches the frequencies by model.position.scale "
            f"({RopeScaling.listed()}; rows: zoo.config.facts.rope.SCALING_FACTS); a trained checkpoint takes "
            f"another at zoo-eval / zoo-generate"
        },
    )
    original_max_seq_len: int | None = field(
        default=None,
        metadata={
            "help": "rope, "
            + listed((k.value for k, row in SCALING_FACTS.items() if "original_max_seq_len" in row.params), "and")
            + ": the training length the rule extends (null: model.max_seq_len)"
        },
    )
    beta_fast: float = field(default=32.0, metadata={"help": "rope, yarn: rotations above which a frequency is kept"})
    beta_slow: float = field(
        default=1.0, metadata={"help": "rope, yarn: rotations below which a frequency is interpolated"}
    )
    attention_factor: float | None = field(
        default=None,
        metadata={"help": "rope, yarn: the cos/sin multiplier (null: 0.1·ln(scale) + 1, as the paper sets it)"},
    )
    # RoPE's per-layer pattern and partial rotation (zoo.config.facts.rope)
    rotary_fraction: float = field(
        default=1.0,
        metadata={
            "help": "rope: the fraction of each head's dimensions rotated, the first ones; the rest pass "
            "unrotated (GPT-NeoX rotary_pct, litgpt rotary_percentage)"
        },
    )
    nope_every: int | None = field(
        default=None,
        metadata={
            "help": "rope: the layers i with (i+1) % k == 0 take no positions, NoPE (SmolLM3 "
            "no_rope_layer_interval, Llama 4); null: every layer rotates"
        },
    )
    theta_local: float | None = field(
        default=None,
        metadata={
            "help": "rope: the base of the sliding-window layers, theta staying the full layers' "
            "(Gemma 3: 10000 local, 1e6 global); null: theta everywhere"
        },
    )

    def __post_init__(self) -> None:
        settle(self, "kind", PositionKind.parse(self.kind, "model.position.kind"))
        settle(self, "scaling", RopeScaling.parse(self.scaling, "model.position.scaling"))
        check_params(self)
        check_scaling(self)
        if not self.theta > 1:  # a base of 1 or less turns every frequency up (1e-300 overflowed to NaN)
            raise ConfigError(f"model.position.theta must be > 1 (RoPE's base; 10000 is usual), got {self.theta}")
        if self.scale < 1:
            raise ConfigError(f"model.position.scale must be >= 1 (positions are divided by it), got {self.scale}")
        if self.num_buckets < 4 or self.num_buckets % 2:
            raise ConfigError(
                f"model.position.num_buckets must be even and >= 4 (half of them per direction "
                f"in an encoder), got {self.num_buckets}"
            )
        if self.max_distance <= self.num_buckets // 2:
            raise ConfigError(
                f"model.position.max_distance ({self.max_distance}) must be > num_buckets/2 "
                f"({self.num_buckets // 2}): offsets below num_buckets/2 have exact buckets, the "
                f"log-spaced ones span the rest up to max_distance"
            )
        if self.clip < 1:
            raise ConfigError(f"model.position.clip must be >= 1, got {self.clip}")
        if not isinstance(self.offset, int) or isinstance(self.offset, bool) or self.offset < 0:
            raise ConfigError(f"model.position.offset must be an integer >= 0, got {self.offset!r}")
