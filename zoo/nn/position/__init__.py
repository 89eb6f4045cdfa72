"""Position schemes, one file each, selected by `model.position.kind`; what the rest of zoo
knows about each without building it is its row of `zoo.config.facts.positions.POSITION_FACTS`.
zoo/nn/position/README.md says how to add one."""

from __future__ import annotations

from zoo.config.facts.positions import POSITION_FACTS
from zoo.config.facts.rope import layer_theta, nope_layer, per_layer
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


def build_position(cfg: ModelConfig, *, causal: bool, layer: int | None = None) -> PositionScheme:
    """One scheme instance for a stack (or a layer, for schemes not shared across layers): the
    sizes every scheme may use, and the `PositionConfig` parameters its row says it reads. With
    `layer`, that layer's RoPE (`zoo.config.facts.rope`): none in a NoPE layer, the local base in
    a sliding one."""
    p = cfg.position
    params = {name: getattr(p, name) for name in POSITION_FACTS[p.kind].params}  # layer_params: read here
    if layer is not None and per_layer(cfg):
        if nope_layer(cfg, layer):
            return NoPositions()
        params["theta"] = layer_theta(cfg, layer)
    return POSITIONS[p.kind](
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        head_dim=cfg.head_dim,
        max_seq_len=cfg.max_seq_len,
        causal=causal,
        **params,
    )


def build_positions(cfg: ModelConfig, *, causal: bool, n_layers: int) -> list[PositionScheme]:
    """A stack's schemes: one shared by its layers, or one per layer for a scheme not shared
    across layers and for RoPE with a per-layer pattern (NoPE layers, a local base)."""
    if POSITIONS[cfg.position.kind].shared_across_layers and not per_layer(cfg):
        return [build_position(cfg, causal=causal)]
    return [build_position(cfg, causal=causal, layer=i) for i in range(n_layers)]


__all__ = ["POSITIONS", "SCHEMES", "PositionScheme", "build_position", "build_positions"]
