"""Language-model packing: documents (each ending in eos) are concatenated into one token
stream and cut into fixed-length windows, so no position is padding."""

from __future__ import annotations

import numpy as np
import torch

from zoo.data.errors import DataError
from zoo.data.prepared import TokenStream


def concat_ids(ds, column: str = "input_ids") -> np.ndarray:
    """All ids of `column` in row order as one int64 array [N]."""
    import pyarrow.compute as pc

    table = ds.with_format("arrow")[:]  # applies any shuffle/select index mapping
    flat = pc.list_flatten(table.column(column))
    return flat.to_numpy().astype(np.int64, copy=False)


class PackedBlocks(torch.utils.data.Dataset):
    """Windows of `block` tokens starting every `stride` tokens of `tokens`; the tail that
    does not fill a window is dropped.

    Causal LM uses block = seq_len + 1, stride = seq_len: consecutive windows share one token,
    so input = w[:-1], labels = w[1:] predicts every token of the stream exactly once.
    Masked LM uses block = stride = seq_len. `tokens` is an array or a `TokenStream` (prepared
    shards, read window by window)."""

    def __init__(self, tokens, block: int, stride: int, name: str = "data"):
        if len(tokens) < block:
            raise DataError(
                f"the {name} split has {len(tokens)} tokens, fewer than one block of {block}; "
                f"lower data.seq_len or use more data (data.max_examples, data.val_fraction)"
            )
        # a TokenStream stays on disk (memory-mapped shards); an array is held as int64
        self.tokens = (
            tokens
            if isinstance(tokens, TokenStream)
            else torch.from_numpy(np.ascontiguousarray(tokens, dtype=np.int64))
        )
        self.block = block
        self.stride = stride

    def __len__(self) -> int:
        return (len(self.tokens) - self.block) // self.stride + 1

    def __getitem__(self, i: int) -> torch.Tensor:
        """LongTensor [block]."""
        if not 0 <= i < len(self):
            raise IndexError(i)
        start = i * self.stride
        window = self.tokens[start : start + self.block]
        return torch.from_numpy(window) if isinstance(window, np.ndarray) else window
