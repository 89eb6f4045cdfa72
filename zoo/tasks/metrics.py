"""Metrics the tasks share."""

from __future__ import annotations

import math

import torch
from torchmetrics import Metric


class WeightedMean(Metric):
    """sum(value · weight) / sum(weight) over every update of every rank: a validation loss
    averaged over target tokens, whatever the batching and the split over ranks. NaN and inf
    propagate (a diverged model reports NaN, not a number without its batch)."""

    full_state_update = False
    total: torch.Tensor  # states add_state registers: declared so their type is known
    weight: torch.Tensor

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.add_state("total", default=torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("weight", default=torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, value: torch.Tensor, weight: torch.Tensor | float = 1.0) -> None:
        weights = torch.as_tensor(weight, dtype=torch.float64, device=self.total.device)
        self.total += value.detach().double() * weights
        self.weight += weights

    def compute(self) -> torch.Tensor:
        self.counted = int(self.weight.item())  # the weight over every rank (compute runs synced)
        return (self.total / self.weight).float()


class BitsPerByte(Metric):
    """Validation bits per byte: sum of the targets' cross-entropy (nats) / (ln 2 · sum of the
    bytes of text they stand for), over every update of every rank (a ratio of sums, never a
    mean of per-batch ratios). Targets that stand for no text (eos, unk and the other special
    tokens: 0 bytes) are left out of both sums, as nanochat's `evaluate_bpb` does: what is
    measured is the text, not the document boundaries. NaN and inf losses of counted targets
    propagate."""

    full_state_update = False
    nats: torch.Tensor  # states add_state registers: declared so their type is known
    bytes: torch.Tensor

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.add_state("nats", default=torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("bytes", default=torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, losses: torch.Tensor, target_bytes: torch.Tensor) -> None:
        """losses (N,) cross-entropy of each target in nats; target_bytes (N,) its bytes of text."""
        counted = target_bytes > 0  # (N,)
        self.nats += torch.where(
            counted, losses.detach().double(), torch.zeros((), dtype=torch.float64, device=losses.device)
        ).sum()
        self.bytes += target_bytes.double().sum()

    def compute(self) -> torch.Tensor:
        return (self.nats / (math.log(2) * self.bytes)).float()
