"""A gate on each head's attention output: o_h ⊙ sigmoid(x W_g)_h before W_o, computed from the
attention's input x (Qiu et al. 2025, "Gated Attention for Large Language Models", the G1
position; Qwen3-Next). `model.attn_gate=headwise` gives one gate per head and token (W_g D × H),
`elementwise` one per head dimension (W_g D × H·Dh). Rows: `zoo.config.facts.heads.GATE_FACTS`.

W_g is an `nn.Linear` (`proj`), with a bias where model.bias gives the projections one. Shapes:
x (B, T, D), out (B, H, T, Dh) -> (B, H, T, Dh)."""

from __future__ import annotations

import torch
from torch import nn

from zoo.config.facts.heads import AttnGate


class HeadGate(nn.Module):
    """sigmoid(x W_g), one gate per head (headwise) or per head dimension (elementwise)."""

    def __init__(self, kind: AttnGate, *, d_model: int, n_heads: int, head_dim: int, bias: bool) -> None:
        super().__init__()
        if kind == AttnGate.none:
            raise ValueError("HeadGate needs a gate kind, not none")
        self.kind, self.n_heads = kind, n_heads
        self.width = 1 if kind == AttnGate.headwise else head_dim  # gates per head
        self.proj = nn.Linear(d_model, n_heads * self.width, bias=bias)

    def forward(self, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """x (B, T, D), each head's output out (B, H, T, Dh) -> out gated (B, H, T, Dh)."""
        B, T, _ = x.shape
        gate = torch.sigmoid(self.proj(x)).view(B, T, self.n_heads, self.width).transpose(1, 2)  # (B, H, T, 1 or Dh)
        return out * gate.to(out.dtype)

    def extra_repr(self) -> str:
        return f"kind={self.kind.value}"
