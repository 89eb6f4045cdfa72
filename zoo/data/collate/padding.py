"""Right padding of variable-length id lists into a batch."""

from __future__ import annotations

from typing import Sequence

import torch


def pad(seqs: Sequence[Sequence[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids LongTensor [B, T], mask LongTensor [B, T]) with T = the longest sequence;
    mask is 1 on tokens, 0 on padding."""
    T = max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), T), value, dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, :len(s)] = torch.as_tensor(list(s), dtype=torch.long)
        mask[b, :len(s)] = 1
    return ids, mask
