"""Facts about each norm type (`model.norm_type`), in one torch-free table: what it computes,
where it comes from, the parameters it holds per normalized vector of width D, roughly how many
FLOPs it spends per element, and what it refuses. The parameter count
(`zoo.config.schema.params`), the FLOP count (`zoo.config.schema.flops`) and the bench peers
read these rows; the modules live in `zoo.nn.norm`, whose registry `NORMS` is keyed by the same
enum, and `tests/config/facts/test_norm_table.py` keeps the two in step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.facts.starts import ONES, ZEROS, Starts

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig


class NormType(Choice):
    layernorm = "layernorm"
    rmsnorm = "rmsnorm"


def _refuses_nothing(cfg: ModelConfig) -> str | None:
    """Valid with every family, position scheme and norm placement."""
    return None


@dataclass(frozen=True, kw_only=True)
class NormFacts:
    """One norm type's row.

    - `what`: what it computes over the last dimension (width D).
    - `paper`: where it comes from.
    - `parameters`: the parameters one norm over a vector of width D holds, given `model.bias`.
    - `flops_per_element`: roughly, the elementwise FLOPs per element normalized (forward); not
      part of `flops_per_token`, which counts matrix multiplies only.
    - `starts`: how each parameter of the built module starts, by its name
      (`zoo.config.facts.starts`); a name the module does not hold (β without model.bias) is skipped.
    - `refuses`: the one-line refusal for a model config it cannot serve, None where it serves
      it; `ModelConfig` raises it before any weight exists.
    """

    what: str
    paper: str
    parameters: Callable[[int, bool], int]
    flops_per_element: int
    starts: Starts = field(compare=False)
    refuses: Callable[[ModelConfig], str | None] = _refuses_nothing


NORM_FACTS: dict[NormType, NormFacts] = {
    NormType.layernorm: NormFacts(
        what="(x - mean(x)) / sqrt(var(x) + eps) · γ (+ β with model.bias)",
        paper="Ba et al. 2016",
        parameters=lambda D, bias: D * (2 if bias else 1),  # γ, and β with model.bias
        flops_per_element=8,  # mean, centre, square, mean, scale, γ, β
        starts={"weight": ONES, "bias": ZEROS},
    ),
    NormType.rmsnorm: NormFacts(
        what="x / sqrt(mean(x²) + eps) · γ; no centring, no bias whatever model.bias says",
        paper="Zhang & Sennrich 2019",
        parameters=lambda D, bias: D,  # γ only
        flops_per_element=4,  # square, mean, scale, γ
        starts={"weight": ONES},
    ),
}


def norm_parameters(cfg: ModelConfig) -> int:
    """The parameters of one norm of `cfg`'s type over its width D."""
    return NORM_FACTS[cfg.norm_type].parameters(cfg.d_model, cfg.bias)


def check_norm(cfg: ModelConfig) -> None:
    """Refuse a config that `cfg.norm_type`'s row cannot serve."""
    refusal = NORM_FACTS[cfg.norm_type].refuses(cfg)
    if refusal is not None:
        raise ConfigError(refusal)
