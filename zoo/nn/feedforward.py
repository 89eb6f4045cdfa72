"""Position-wise feed-forward sub-layer: plain (ReLU, GELU; Vaswani et al. 2017) or gated
(SwiGLU, GeGLU and its tanh form; Shazeer 2020, "GLU Variants Improve Transformer")."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.config.schema.model import GATED, Activation


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


ACTIVATIONS = {
    Activation.relu: F.relu,
    Activation.gelu: F.gelu,
    Activation.gelu_tanh: gelu_tanh,
    Activation.swiglu: F.silu,
    Activation.geglu: F.gelu,
    Activation.geglu_tanh: gelu_tanh,
}


class FeedForward(nn.Module):
    """x -> W_out · act(W_in · x) or, gated, W_out · (act(W_gate · x) ⊙ W_up · x).

    The gate and up projections of a gated unit are one fused matmul (`w_in` has 2·d_ff
    outputs: gate first, then up). Shapes: x (B, T, D) -> (B, T, D).
    """

    def __init__(self, d_model: int, d_ff: int, activation: Activation, bias: bool, dropout: float):
        super().__init__()
        self.activation = activation
        self.gated = activation in GATED
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
