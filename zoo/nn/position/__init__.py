"""Position schemes, one file each, selected by `model.position.kind`; what the rest of zoo
knows about each without building it is its row of `zoo.config.facts.positions.POSITION_FACTS`.
zoo/nn/position/README.md says how to add one."""

from __future__ import annotations

from zoo.config.facts.positions import POSITION_FACTS
from zoo.config.schema.model import ModelConfig, PositionKind
from zoo.nn.position.alibi import ALiBiPositions
from zoo.nn.position.base import PositionScheme
from zoo.nn.position.learned import LearnedPositions
from zoo.nn.position.none import NoPositions
from zoo.nn.position.relative import RelativeBiasPositions
from zoo.nn.position.rope import RotaryPositions
from zoo.nn.position.shaw import ShawPositions
from zoo.nn.position.sinusoidal import SinusoidalPositions

SCHEMES: tuple[type[PositionScheme], ...] = (
    NoPositions,
    SinusoidalPositions,
    LearnedPositions,
    RelativeBiasPositions,
    ShawPositions,
    ALiBiPositions,
    RotaryPositions,
)

# position kind -> its class; each class names its own kind
POSITIONS: dict[PositionKind, type[PositionScheme]] = {
    scheme.kind: scheme for scheme in SCHEMES if scheme.kind is not None
}


def build_position(cfg: ModelConfig, *, causal: bool) -> PositionScheme:
    """One scheme instance for a stack (or a layer, for schemes not shared across layers): the
    sizes every scheme may use, and the `PositionConfig` parameters its row says it reads."""
    p = cfg.position
    return POSITIONS[p.kind](
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        head_dim=cfg.head_dim,
        max_seq_len=cfg.max_seq_len,
        causal=causal,
        **{name: getattr(p, name) for name in POSITION_FACTS[p.kind].params},
    )


__all__ = ["POSITIONS", "SCHEMES", "PositionScheme", "build_position"]
