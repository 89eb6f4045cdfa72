"""Position schemes, one file each, selected by `model.position.kind`."""

from __future__ import annotations

from zoo.config.model import ModelConfig, PositionKind
from zoo.nn.position.alibi import ALiBiPositions
from zoo.nn.position.base import PositionScheme
from zoo.nn.position.learned import LearnedPositions
from zoo.nn.position.none import NoPositions
from zoo.nn.position.relative import RelativeBiasPositions
from zoo.nn.position.rope import RotaryPositions
from zoo.nn.position.shaw import ShawPositions
from zoo.nn.position.sinusoidal import SinusoidalPositions

POSITIONS: dict[PositionKind, type[PositionScheme]] = {
    PositionKind.none: NoPositions,
    PositionKind.sinusoidal: SinusoidalPositions,
    PositionKind.learned: LearnedPositions,
    PositionKind.relative: RelativeBiasPositions,
    PositionKind.shaw: ShawPositions,
    PositionKind.alibi: ALiBiPositions,
    PositionKind.rope: RotaryPositions,
}


def build_position(cfg: ModelConfig, *, causal: bool) -> PositionScheme:
    """One scheme instance for a stack (or a layer, for schemes not shared across layers)."""
    p = cfg.position
    return POSITIONS[p.kind](
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        head_dim=cfg.head_dim,
        max_seq_len=cfg.max_seq_len,
        causal=causal,
        theta=p.theta,
        scale=p.scale,
        num_buckets=p.num_buckets,
        max_distance=p.max_distance,
        clip=p.clip,
        offset=p.offset,
    )


__all__ = ["POSITIONS", "PositionScheme", "build_position"]
