"""No position information: attention is permutation-equivariant (useful as an ablation
baseline; causal masking alone still leaks order to a decoder, Haviv et al. 2022)."""

from zoo.config.facts.positions import PositionKind
from zoo.nn.position.base import PositionScheme


class NoPositions(PositionScheme):
    """Every hook is the identity."""

    kind = PositionKind.none

    def __init__(self, **_: object) -> None:
        super().__init__()
