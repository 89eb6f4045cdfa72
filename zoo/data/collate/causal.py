"""Causal LM batches from packed windows (see `zoo.data.packing`)."""

from __future__ import annotations

from typing import Sequence

import torch


def collate_causal(blocks: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
    """blocks: B windows of T+1 ids ->
    input_ids [B, T] = w[:-1], labels [B, T] = w[1:], attention_mask [B, T] all ones (packed,
    nothing is padding)."""
    w = torch.stack(list(blocks)).long()  # (B, T+1)
    x = w[:, :-1].contiguous()
    return {"input_ids": x, "labels": w[:, 1:].contiguous(), "attention_mask": torch.ones_like(x)}
