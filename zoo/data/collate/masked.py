"""BERT masking for masked-LM batches (Devlin et al. 2019, section 3.1).

Of the non-special tokens, `probability` (15%) are chosen for prediction; of the chosen, 80%
become <mask>, 10% a random ordinary token, 10% stay unchanged. `labels` hold the original id
at chosen positions and -100 (ignored by cross-entropy) elsewhere.

Special ids are zoo's fixed 0 .. NUM_SPECIAL-1 by default; a tokenizer with ids of its own (kind
hf) passes them as `special_ids`, and ordinary tokens are then every other id of [0, V).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

import torch

from zoo.data.tokenizers.base import NUM_SPECIAL, SPECIAL_IDS
from zoo.nn.chunked_loss import IGNORE as IGNORE_INDEX  # labels the losses skip


class MaskingCollator:
    """Callable collate_fn: B windows of T ids -> input_ids, labels [B, T] (packed blocks: no
    padding, so no attention_mask).

    Randomness: each training batch is masked by a generator seeded from `seed`, the batch's
    ids and the epoch (`set_epoch`, called by the training loader): a block is masked
    differently in every epoch, the same way in every process and DataLoader worker, and a run
    resumed mid-epoch masks the remaining batches as the uninterrupted run would. With
    `fixed=True` (validation) each example is masked by a generator seeded from `seed` and its
    own ids: the same way every time, in any batch, on any number of ranks."""

    def __init__(
        self,
        vocab_size: int,
        *,
        probability: float = 0.15,
        seed: int = 0,
        fixed: bool = False,
        mask_id: int = SPECIAL_IDS["mask"],
        num_special: int = NUM_SPECIAL,
        special_ids: Iterable[int | None] | None = None,
    ):
        specials = set(range(num_special)) if special_ids is None else {int(i) for i in special_ids if i is not None}
        special = torch.zeros(vocab_size, dtype=torch.bool)  # (V,) True at special ids
        special[[i for i in specials if 0 <= i < vocab_size]] = True
        self.ordinary = (~special).nonzero().squeeze(1)  # (V - number of specials,) ids a random draw may give
        if self.ordinary.numel() == 0:
            raise ValueError(f"vocab_size {vocab_size} leaves no ordinary tokens to mask")
        self.special = special
        self.vocab_size = vocab_size
        self.probability = probability
        self.seed = seed
        self.fixed = fixed
        self.mask_id = mask_id
        self.num_special = num_special
        self.epoch = 0

    def __call__(self, blocks: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        ids = torch.stack([torch.as_tensor(b) for b in blocks]).long()  # (B, T)
        if self.fixed:  # per example: the same mask whatever batch (or rank) it lands in
            rows = [self.mask(row[None], self._generator_for(row[None])) for row in ids]
            input_ids, labels = (torch.cat(parts) for parts in zip(*rows))  # (B, T) each
        else:
            input_ids, labels = self.mask(ids, self._generator_for(ids))
        return {"input_ids": input_ids, "labels": labels}

    def mask(self, ids: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(masked ids, labels), both LongTensor of the shape of `ids`."""
        maskable = ~self.special[ids]  # (B, T)
        chosen = (torch.rand(ids.shape, generator=g) < self.probability) & maskable
        labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE_INDEX))
        roll = torch.rand(ids.shape, generator=g)
        to_mask = chosen & (roll < 0.8)
        to_random = chosen & (roll >= 0.8) & (roll < 0.9)
        # an index into the ordinary ids; with zoo's fixed specials the same draw as
        # randint(NUM_SPECIAL, V), so batches are unchanged from earlier versions
        random_ids = self.ordinary[torch.randint(0, self.ordinary.numel(), ids.shape, generator=g)]  # (B, T)
        out = torch.where(to_mask, torch.full_like(ids, self.mask_id), ids)
        out = torch.where(to_random, random_ids, out)
        return out, labels

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def _generator_for(self, ids: torch.Tensor) -> torch.Generator:
        crc = zlib.crc32(ids.numpy().tobytes())
        epoch = 0 if self.fixed else self.epoch + 1
        return torch.Generator().manual_seed(((self.seed * 1_000_003 + epoch) * 4_294_967_311 + crc) % (1 << 63))
