"""Causal LM batches of associative-recall windows (`data=recall`) with the loss on the answers
only, as Zoology trains MQAR: each window is one sequence and its eos (`zoo.data.recall`), and
only the label after a query key (its value) is kept; every other label is IGNORE_INDEX."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from zoo.data.collate.causal import collate_causal
from zoo.data.collate.masked import IGNORE_INDEX


def answers_only(batch: dict[str, torch.Tensor], pairs: int) -> dict[str, torch.Tensor]:
    """`batch` (input_ids, labels [B, T]) with labels kept only at the query slots whose key and
    next id are a pair of the window's first 2 * `pairs` ids (a filler slot that repeats a pair
    by chance is one more query). Ids, not symbols: it holds for any tokenizer that gives each
    symbol one id."""
    x, y = batch["input_ids"], batch["labels"]
    keys, values = x[:, 0 : 2 * pairs : 2], x[:, 1 : 2 * pairs : 2]  # (B, N) each
    length = x.shape[1] - 1  # symbols of the sequence; its eos is the last id
    slot = torch.arange(2 * pairs, 2 * pairs + 2 * ((length - 2 * pairs) // 2), 2)  # (S,) query-slot starts
    asked, told = x[:, slot], y[:, slot]  # (B, S) each
    match = ((asked[:, :, None] == keys[:, None, :]) & (told[:, :, None] == values[:, None, :])).any(-1)  # (B, S)
    keep = torch.zeros_like(y, dtype=torch.bool)  # (B, T)
    keep[:, slot] = match
    return {**batch, "labels": y.masked_fill(~keep, IGNORE_INDEX)}


class RecallCollate:
    """`collate_causal`, then `answers_only` with `pairs` key-value pairs (a class: DataLoader
    workers pickle it)."""

    def __init__(self, pairs: int):
        self.pairs = pairs

    def __call__(self, blocks: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        return answers_only(collate_causal(blocks), self.pairs)
