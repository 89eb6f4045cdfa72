"""Sequence classification batches."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from zoo.data.collate.padding import pad
from zoo.data.tokenizers.base import SPECIAL_IDS


def collate_classification(examples: Sequence[dict], *, pad_id: int = SPECIAL_IDS["pad"]) -> dict[str, torch.Tensor]:
    """Examples {"input_ids": [cls] + x, "label": k} -> input_ids, attention_mask [B, T]
    (right-padded) and labels [B]."""
    input_ids, attention_mask = pad([e["input_ids"] for e in examples], pad_id)
    labels = torch.tensor([int(e["label"]) for e in examples], dtype=torch.long)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
