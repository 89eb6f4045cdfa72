"""Position-wise feed-forward sub-layer: plain (ReLU, GELU; Vaswani et al. 2017; ReLU², So et al.
2021) or gated (SwiGLU, GeGLU and its tanh form; Shazeer 2020, "GLU Variants Improve Transformer").

Two registries keyed by the config's enums and built from their torch-free rows: `ACTIVATIONS`
(each row of `zoo.config.facts.activations.ACTIVATION_FACTS` names its `torch.nn.functional`
function and GELU approximation) and `FFNS` (one builder per row of
`zoo.config.facts.ffn.FFN_FACTS`). `tests/config/facts/test_activation_table.py` and
`tests/config/facts/test_ffn_table.py` keep them in step with the rows."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from zoo.config.facts.activations import ACTIVATION_FACTS, Activation, ActivationFacts
from zoo.config.facts.ffn import FFNKind, expert_width
from zoo.config.facts.moe_experts import MoEExpert
from zoo.config.schema.model import ModelConfig
from zoo.nn.gpt_oss_experts import gpt_oss_moe
from zoo.nn.moe import MoE


def activation_function(facts: ActivationFacts) -> Callable[[torch.Tensor], torch.Tensor]:
    """The `torch.nn.functional` function a row names, with its GELU approximation, squared
    where the row says so (ReLU²)."""
    fn = getattr(F, facts.function)
    fn = fn if facts.approximate == "none" else partial(fn, approximate=facts.approximate)
    return partial(_squared, fn) if facts.squared else fn


def _squared(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """fn(x)², e.g. ReLU² = max(0, x)² (So et al. 2021, Primer)."""
    return fn(x).square()


ACTIVATIONS: dict[Activation, Callable[[torch.Tensor], torch.Tensor]] = {
    kind: activation_function(facts) for kind, facts in ACTIVATION_FACTS.items()
}


class FeedForward(nn.Module):
    """x -> W_out · act(W_in · x) or, gated, W_out · (act(W_gate · x) ⊙ W_up · x).

    The gate and up projections of a gated unit are one fused matmul (`w_in` has 2·d_ff
    outputs: gate first, then up). Shapes: x (B, T, D) -> (B, T, D).
    """

    def __init__(self, d_model: int, d_ff: int, activation: Activation, bias: bool, dropout: float):
        super().__init__()
        self.activation = activation
        self.gated = ACTIVATION_FACTS[activation].gated
        self.act = ACTIVATIONS[activation]
        self.w_in = nn.Linear(d_model, 2 * d_ff if self.gated else d_ff, bias=bias)
        self.w_out = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.w_in(x)  # (B, T, d_ff or 2·d_ff)
        if self.gated:
            gate, up = h.chunk(2, dim=-1)  # (B, T, d_ff) each
            h = self.act(gate) * up
        else:
            h = self.act(h)
        return self.w_out(self.dropout(h))

    def extra_repr(self) -> str:
        return f"activation={self.activation.value}"


def dense(cfg: ModelConfig) -> nn.Module:
    """One dense unit of `cfg`'s width, hidden width, activation, bias and dropout."""
    return FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.bias, cfg.dropout)


def moe(cfg: ModelConfig) -> nn.Module:
    """A mixture-of-experts layer of `cfg` (`zoo.nn.moe.MoE`), its shared experts one dense unit
    moe_shared experts wide (none at 0), without biases."""
    width = expert_width(cfg, cfg.d_ff)
    shared = (
        FeedForward(cfg.d_model, cfg.moe_shared * width, cfg.activation, False, cfg.dropout) if cfg.moe_shared else None
    )
    if cfg.moe_expert == MoEExpert.gpt_oss:  # router and experts with biases, clamped SwiGLU (zoo.nn.gpt_oss_experts)
        return gpt_oss_moe(cfg, shared)
    return MoE(cfg, act=ACTIVATIONS[cfg.activation], shared=shared)


FFNS: dict[FFNKind, Callable[[ModelConfig], nn.Module]] = {
    FFNKind.dense: dense,
    FFNKind.moe: moe,
}


def build_ffn(cfg: ModelConfig, kind: FFNKind | None = None) -> nn.Module:
    """The feed-forward unit of `kind` (default `cfg.ffn`; a stack's layers: `zoo.config.facts.ffn.layer_kinds`)
    (ValueError for a kind with no builder)."""
    kind = cfg.ffn if kind is None else kind
    if kind not in FFNS:
        raise ValueError(f"no feed-forward builder for model.ffn={kind.value}")
    return FFNS[kind](cfg)
