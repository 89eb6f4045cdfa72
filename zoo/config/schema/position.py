"""Typed schema of a model's position scheme (`model.position`): the scheme's kind and its
parameters, checked before any weight exists. Nothing here imports torch."""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.config.errors import ConfigError
from zoo.config.facts.positions import PositionKind, check_params
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
            "help": "rope: linear position interpolation factor (Chen et al. 2023); "
            "positions are divided by it to extend the context"
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

    def __post_init__(self) -> None:
        settle(self, "kind", PositionKind.parse(self.kind, "model.position.kind"))
        check_params(self)
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
