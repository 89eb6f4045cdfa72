"""Right padding of variable-length id lists into a batch."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def pad(seqs: Sequence[Sequence[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids LongTensor [B, T], mask LongTensor [B, T]) with T = the longest sequence;
    mask is 1 on tokens, 0 on padding."""
    T = max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), T), value, dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
        mask[b, : len(s)] = 1
    return ids, mask


MASKS = ("attention_mask", "decoder_attention_mask")


def without_full_masks(batch):
    """The batch without the attention masks that mark no padding (all ones). Called on the CPU
    before a batch moves to its device (`ZooDataModule.on_before_batch_transfer`), where reading
    a mask is free: the model then takes SDPA's fused causal / unmasked kernels on any device
    without a host sync (`zoo.nn.host`)."""
    if not isinstance(batch, dict):
        return batch
    full = [key for key in MASKS if isinstance(batch.get(key), torch.Tensor) and bool(batch[key].all())]
    return {key: value for key, value in batch.items() if key not in full} if full else batch
