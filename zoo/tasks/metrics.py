"""Metrics the tasks share."""

from __future__ import annotations

import torch
from torchmetrics import Metric


class WeightedMean(Metric):
    """sum(value · weight) / sum(weight) over every update of every rank: a validation loss
    averaged over target tokens, whatever the batching and the split over ranks. NaN and inf
    propagate (a diverged model reports NaN, not a number without its batch)."""

    full_state_update = False

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.add_state("total", default=torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("weight", default=torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, value: torch.Tensor, weight: torch.Tensor | float = 1.0) -> None:
        weight = torch.as_tensor(weight, dtype=torch.float64, device=self.total.device)
        self.total += value.detach().double() * weight
        self.weight += weight

    def compute(self) -> torch.Tensor:
        return (self.total / self.weight).float()
