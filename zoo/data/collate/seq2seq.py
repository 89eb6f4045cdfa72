"""Sequence-to-sequence batches with teacher forcing."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from zoo.data.collate.masked import IGNORE_INDEX
from zoo.data.collate.padding import pad
from zoo.data.tokenizers.base import SPECIAL_IDS


def collate_seq2seq(
    examples: Sequence[dict],
    *,
    pad_id: int = SPECIAL_IDS["pad"],
    bos_id: int = SPECIAL_IDS["bos"],
    eos_id: int = SPECIAL_IDS["eos"],
) -> dict[str, torch.Tensor]:
    """Examples {"input_ids": x, "target_ids": y} ->
    input_ids, attention_mask [B, S] (x right-padded);
    decoder_input_ids [B, T] = [bos] + y (right-shifted), decoder_attention_mask [B, T];
    labels [B, T] = y + [eos], -100 on padding."""
    input_ids, attention_mask = pad([e["input_ids"] for e in examples], pad_id)
    ys = [list(e["target_ids"]) for e in examples]
    decoder_input_ids, decoder_attention_mask = pad([[bos_id] + y for y in ys], pad_id)
    labels, _ = pad([y + [eos_id] for y in ys], IGNORE_INDEX)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "decoder_input_ids": decoder_input_ids,
        "decoder_attention_mask": decoder_attention_mask,
        "labels": labels,
    }
