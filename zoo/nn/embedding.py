"""The token embedding table (`TokenEmbedding`): ids to vectors, scaled as the recipe asks."""

from __future__ import annotations

import math

import torch
from torch import nn

from zoo.nn.host import host_reads_are_free


class TokenEmbedding(nn.Embedding):
    """input_ids (B, T) -> (B, T, D), optionally multiplied by sqrt(D) (Vaswani et al. §3.4):
    `scale=True`, or `multiplier` (μP reads sqrt(D) at its base width).

    Ids outside [0, V) are refused with a message instead of an index error deep in torch
    (on the CPU in eager mode, where reading them is free: `zoo.nn.host`).
    """

    def __init__(self, vocab_size: int, d_model: int, *, scale: bool = False, multiplier: float | None = None) -> None:
        super().__init__(vocab_size, d_model)
        if multiplier is None:
            multiplier = math.sqrt(d_model) if scale else 1.0
        self.multiplier = multiplier

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        if input_ids.numel() and host_reads_are_free(input_ids):
            low, high = int(input_ids.min()), int(input_ids.max())
            if low < 0 or high >= self.num_embeddings:
                bad = low if low < 0 else high
                raise ValueError(
                    f"token id {bad} is outside the vocabulary [0, {self.num_embeddings}) "
                    f"(model.vocab_size={self.num_embeddings})"
                )
        x = super().forward(input_ids)  # (B, T, D)
        return x * self.multiplier if self.multiplier != 1.0 else x
