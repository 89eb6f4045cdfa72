"""Causal LM batches from packed windows (see `zoo.data.packing`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from zoo.data.collate.masked import IGNORE_INDEX


def collate_causal(blocks: Sequence[torch.Tensor], eos_id: int | None = None) -> dict[str, torch.Tensor]:
    """blocks: B windows of T+1 ids ->
    input_ids [B, T] = w[:-1], labels [B, T] = w[1:]. No attention_mask: packed blocks have no
    padding, and without a mask attention takes the fused causal path.

    With `eos_id` (data.document_mask=true) also document_ids [B, T]: the number of eos ids
    before each position in its window, so a document's eos is its last token and the token
    after it starts the next document (a window's first tokens are the rest of a document cut
    at the window's start, counted as a document of their own). The label at an input eos is
    the next document's first token: it is IGNORE_INDEX, because under the document mask
    nothing of that document is seen from there; a document's first token is predicted by
    no one, as when the document runs alone."""
    w = torch.stack(list(blocks)).long()  # (B, T+1)
    x = w[:, :-1].contiguous()
    batch = {"input_ids": x, "labels": w[:, 1:].contiguous()}
    if eos_id is not None:
        ends = (x == eos_id).long()  # (B, T)
        batch["document_ids"] = ends.cumsum(-1) - ends  # (B, T)
        batch["labels"] = batch["labels"].masked_fill(ends.bool(), IGNORE_INDEX)
    return batch


class DocumentCollate:
    """`collate_causal` with document ids at the tokenizer's eos id (a class: DataLoader workers
    pickle it)."""

    def __init__(self, eos_id: int):
        self.eos_id = eos_id

    def __call__(self, blocks):
        return collate_causal(blocks, eos_id=self.eos_id)
