"""gpt-oss's mixture of experts (`model.ffn=moe model.moe_expert=gpt_oss`; OpenAI 2025): zoo's
`MoE` (`zoo.nn.moe`: routing, dispatch, auxiliary losses) with a bias on the router's logits and
experts whose projections have biases and whose gated unit is gpt-oss's clamped SwiGLU (the row:
`zoo.config.facts.moe_experts.EXPERT_FACTS`).

Weights beside the `Experts` ones: `router.bias` (E,), `experts.b_in` (E, 2·F) (gate then up, as
`w_in`'s rows) and `experts.b_out` (E, D). The experts run on the loop over experts (the grouped
GEMM takes no per-expert bias). Shapes as in `zoo.nn.moe`: N tokens, D, F the expert width."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.config.facts.activations import Activation
from zoo.config.facts.ffn import expert_width
from zoo.config.facts.moe_experts import EXPERT_FACTS, SWIGLU_ALPHA, SWIGLU_LIMIT, MoEExpert
from zoo.config.schema.model import ModelConfig
from zoo.nn.moe import Experts, MoE


def clamped_swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """gpt-oss's unit: g = min(gate, limit), u = clip(up, ±limit), (u + 1) · g · sigmoid(alpha·g)."""
    g = gate.clamp(max=SWIGLU_LIMIT)
    return (up.clamp(-SWIGLU_LIMIT, SWIGLU_LIMIT) + 1) * g * torch.sigmoid(SWIGLU_ALPHA * g)


class BiasedExperts(Experts):
    """E clamped-SwiGLU units with biases: w_in (E, 2·F, D) and b_in (E, 2·F), w_out (E, D, F)
    and b_out (E, D)."""

    starts = EXPERT_FACTS[MoEExpert.gpt_oss].starts

    def __init__(self, n_experts: int, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__(n_experts, d_model, d_ff, Activation.swiglu, F.silu, dropout)
        self.b_in = nn.Parameter(torch.empty(n_experts, 2 * d_ff))
        self.b_out = nn.Parameter(torch.empty(n_experts, d_model))

    def hidden(self, h: torch.Tensor) -> torch.Tensor:
        """h (n, 2·F) = [gate | up] -> the clamped SwiGLU (n, F)."""
        gate, up = h.chunk(2, dim=-1)  # (n, F) each
        return self.dropout(clamped_swiglu(gate, up))

    def loop(self, rows: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """As `Experts.loop`, each expert's projections with their biases."""
        parts, start = [], 0
        w_in, w_out, b_in, b_out = (p.unbind(0) for p in (self.w_in, self.w_out, self.b_in, self.b_out))
        for i, n in enumerate(counts):
            if n:
                h = self.hidden(F.linear(rows[start : start + n], w_in[i], b_in[i]))  # (n, F)
                parts.append(F.linear(h, w_out[i], b_out[i]))  # (n, D)
            start += n
        if start < rows.shape[0]:
            parts.append(rows.new_zeros(rows.shape[0] - start, rows.shape[1]))  # (M - kept, D)
        return torch.cat(parts) if parts else torch.zeros_like(rows)  # (M, D)

    def grouped(self, rows: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("gpt-oss's experts run on the loop (the grouped GEMM takes no per-expert bias)")


def gpt_oss_moe(cfg: ModelConfig, shared: nn.Module | None) -> MoE:
    """A mixture layer of `cfg` with gpt-oss's router bias and experts, on the loop dispatch."""
    layer = MoE(cfg, act=F.silu, shared=shared)
    layer.router.bias = nn.Parameter(torch.empty(cfg.moe_experts))  # (E,): the Linear adds it to the logits
    layer.experts = BiasedExperts(cfg.moe_experts, cfg.d_model, expert_width(cfg, cfg.d_ff), cfg.dropout)
    layer.dispatch = "loop"
    return layer
