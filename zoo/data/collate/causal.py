"""Causal LM batches from packed windows (see `zoo.data.packing`)."""

from __future__ import annotations

from typing import Sequence

import torch


def collate_causal(blocks: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
    """blocks: B windows of T+1 ids ->
    input_ids [B, T] = w[:-1], labels [B, T] = w[1:]. No attention_mask: packed blocks have no
    padding, and without a mask attention takes the fused causal path."""
    w = torch.stack(list(blocks)).long()  # (B, T+1)
    x = w[:, :-1].contiguous()
    return {"input_ids": x, "labels": w[:, 1:].contiguous()}
