"""The decoding state of one recurrent layer (Gated DeltaNet, Mamba 2): what a KV cache is to
softmax attention, at a size that does not grow with the context.

A recurrent mixer keeps two tensors per sequence: `conv`, the last K - 1 inputs of its short
causal convolution (B, C, K - 1), and `ssm`, the state its recurrence carries (Gated DeltaNet:
(B, Hv, dk, dv) float32; Mamba 2: (B, H, P, N)). `update` replaces them after a forward over
new tokens; `length` counts the tokens seen.

One class serves growing and static decoding: with a `capacity` (`zoo.models.generate`'s
static cache) the tensors are allocated at the first update and written in place afterwards,
and the tokens seen are a device tensor `slot`, so a compiled step sees the same shapes and
addresses at every step (a CUDA graph replays it); `reorder` selects batch rows in place too.
Without one, `update` keeps the new tensors as they are.
"""

from __future__ import annotations

import torch


class RecurrentState:
    """One recurrent layer's state; `capacity`: the static cache's bound on positions."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity
        self.conv: torch.Tensor | None = None  # (B, C, K - 1)
        self.ssm: torch.Tensor | None = None  # (B, heads, ...) the recurrence's state
        self.slot: torch.Tensor | None = None  # static: () long, the tokens seen
        self._seen = 0  # growing: the tokens seen

    @property
    def static(self) -> bool:
        return self.capacity is not None

    @property
    def length(self) -> int:
        """The tokens seen (a static state reads its slot on the host: for callers outside the step)."""
        if self.static:
            return 0 if self.slot is None else int(self.slot)
        return self._seen

    @property
    def empty(self) -> bool:
        """Nothing seen yet: the mixer starts from zeros."""
        return self.ssm is None

    def update(self, conv: torch.Tensor, ssm: torch.Tensor, T: int) -> None:
        """Hold `conv` (B, C, K - 1) and `ssm` after a forward over T new tokens."""
        if not self.static:
            self.conv, self.ssm = conv, ssm
            self._seen += T
            return
        if self.conv is None or self.ssm is None or self.slot is None:
            self.conv, self.ssm = conv.clone(), ssm.clone()
            self.slot = torch.zeros((), dtype=torch.long, device=ssm.device)
            if not torch.compiler.is_compiling():  # traced code may not mark: `mark_static` after it
                self.mark_static()
        else:
            self.conv.copy_(conv)
            self.ssm.copy_(ssm)
        self.slot.add_(T)

    def mark_static(self) -> None:
        """Tell torch.compile that the tensors keep their addresses (CUDA only; outside compiled
        code), as `zoo.nn.cache.StaticKVCache.mark_static` does for keys and values."""
        if self.ssm is not None and self.ssm.device.type == "cuda":
            for t in (self.conv, self.ssm, self.slot):
                torch._dynamo.mark_static_address(t)

    def reorder(self, index: torch.Tensor) -> None:
        """Select batch rows (beam search); in place for a static state."""
        if self.conv is None or self.ssm is None:
            return
        if self.static:
            self.conv.copy_(self.conv[index])
            self.ssm.copy_(self.ssm[index])
        else:
            self.conv, self.ssm = self.conv[index], self.ssm[index]

    def nbytes(self) -> int:
        """The bytes held: what does not grow with the context."""
        return sum(t.numel() * t.element_size() for t in (self.conv, self.ssm) if t is not None)
