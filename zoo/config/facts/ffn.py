"""Facts about each feed-forward kind (`model.ffn`), in one torch-free table: what it is, the
parameters it holds and the matrix-multiply FLOPs it spends per token, from the width D
(model.d_model), the hidden width F (model.d_ff), whether the activation is gated
(`zoo.config.facts.activations`) and model.bias; and what it refuses. The parameter count
(`zoo.config.schema.params`), `model.param_budget` and the FLOP count (`zoo.config.schema.flops`)
read these rows; `zoo.nn.feedforward.FFNS` is keyed by the same enum, and
`tests/config/facts/test_ffn_table.py` keeps the two in step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

from zoo.config.choice import Choice
from zoo.config.facts.activations import ACTIVATION_FACTS
from zoo.config.errors import ConfigError

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig


class FFNKind(Choice):
    dense = "dense"  # one position-wise unit for every token (Vaswani et al. 2017)


def _refuses_nothing(cfg: ModelConfig) -> Optional[str]:
    """Valid with every family, position scheme, norm and activation."""
    return None


@dataclass(frozen=True, kw_only=True)
class FFNFacts:
    """One feed-forward kind's row.

    - `what`: what one unit computes; `paper`: where it comes from.
    - `parameters(D, F, gated, bias)`: the parameters one unit holds. Linear in F: the parameter
      budget (`model.param_budget`) solves for F from two evaluations of it.
    - `flops(D, F, gated)`: the matrix-multiply FLOPs of one unit for one token (2 per
      multiply-add of the weights a token passes through; a sparse unit counts its active ones).
    - `refuses`: the one-line refusal for a model config it cannot serve, None where it serves it.
    """

    what: str
    paper: str
    parameters: Callable[[int, int, bool, bool], int]
    flops: Callable[[int, int, bool], int]
    refuses: Callable[[ModelConfig], Optional[str]] = _refuses_nothing


def _dense_parameters(D: int, F: int, gated: bool, bias: bool) -> int:
    """W_in (D × F, gated D × 2·F: gate and up), W_out (F × D); biases F (2·F) + D."""
    inner = 2 if gated else 1
    return (inner + 1) * D * F + ((inner * F + D) if bias else 0)


def _dense_flops(D: int, F: int, gated: bool) -> int:
    """2 per weight of W_in and W_out."""
    return 2 * (3 if gated else 2) * D * F


FFN_FACTS: dict[FFNKind, FFNFacts] = {
    FFNKind.dense: FFNFacts(
        what="W_out · act(W_in · x), or gated W_out · (act(W_gate · x) ⊙ W_up · x)",
        paper="Vaswani et al. 2017, §3.3; gated: Shazeer 2020",
        parameters=_dense_parameters,
        flops=_dense_flops,
    ),
}


def gated(cfg: ModelConfig) -> bool:
    """Whether `cfg`'s activation is a gated linear unit."""
    return ACTIVATION_FACTS[cfg.activation].gated


def ffn_parameters(cfg: ModelConfig, d_ff: int) -> int:
    """The parameters of one feed-forward unit of `cfg` at hidden width `d_ff`."""
    return FFN_FACTS[cfg.ffn].parameters(cfg.d_model, d_ff, gated(cfg), cfg.bias)


def ffn_flops(cfg: ModelConfig) -> int:
    """The matrix-multiply FLOPs of one feed-forward unit of `cfg` for one token."""
    return FFN_FACTS[cfg.ffn].flops(cfg.d_model, cfg.d_ff, gated(cfg))


def check_ffn(cfg: ModelConfig) -> None:
    """Refuse a config that `cfg.ffn`'s row cannot serve."""
    refusal = FFN_FACTS[cfg.ffn].refuses(cfg)
    if refusal is not None:
        raise ConfigError(refusal)
