"""Learned absolute position embeddings (Gehring et al. 2017; GPT, BERT): a table of
max_seq_len × D parameters added to the token embeddings. Positions past the table are refused.

`offset` rows precede position 0 (BART keeps 2 there): position p reads row p + offset."""

from __future__ import annotations

import torch
from torch import nn

from zoo.config.facts.positions import PositionKind, extrapolating
from zoo.nn.host import host_reads_are_free
from zoo.nn.position.base import PositionScheme


class LearnedPositions(PositionScheme):
    kind = PositionKind.learned

    def __init__(self, *, d_model: int, max_seq_len: int, offset: int = 0, **_: object) -> None:
        super().__init__()
        self.max_seq_len, self.offset = max_seq_len, offset
        self.table = nn.Embedding(max_seq_len + offset, d_model)  # (max_seq_len + offset, D)

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        if positions.numel() and host_reads_are_free(positions) and int(positions.max()) >= self.max_seq_len:
            raise ValueError(
                f"position {int(positions.max())} is past the learned position table "
                f"(model.max_seq_len={self.max_seq_len}); use a shorter input or a scheme that "
                f"extrapolates ({', '.join(kind.value for kind in extrapolating())})"
            )
        return x + self.table(positions + self.offset if self.offset else positions)  # (B, T, D)
