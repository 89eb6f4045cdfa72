"""Language-model packing and the causal-LM shift."""

import numpy as np
import pytest
import torch
from datasets import Dataset

from zoo.data import DataError, PackedBlocks, collate_causal
from zoo.data.packing import concat_ids


def test_blocks_have_exact_shape_and_cover_the_stream():
    tokens = np.arange(100)
    blocks = PackedBlocks(tokens, block=9, stride=8)  # seq_len 8
    assert len(blocks) == (100 - 9) // 8 + 1 == 12
    assert all(blocks[i].shape == (9,) and blocks[i].dtype == torch.long for i in range(12))
    assert blocks[1][0] == blocks[0][-1]  # windows overlap by the one shifted token
    batch = collate_causal([blocks[i] for i in range(12)])
    assert batch["input_ids"].shape == batch["labels"].shape == (12, 8)
    assert torch.equal(batch["labels"][:, :-1], batch["input_ids"][:, 1:])
    assert torch.equal(batch["labels"], batch["input_ids"] + 1)
    assert torch.equal(batch["input_ids"].flatten(), torch.arange(96))  # each token input once
    assert set(batch) == {"input_ids", "labels"}  # packed: no padding, no mask
    with pytest.raises(IndexError):
        blocks[12]


def test_non_overlapping_blocks_for_masked_lm():
    blocks = PackedBlocks(np.arange(50), block=10, stride=10)
    assert len(blocks) == 5 and blocks[4].tolist() == list(range(40, 50))


def test_too_short_split_is_a_clear_error():
    with pytest.raises(DataError, match=r"validation split has 5 tokens, fewer than one block of 9"):
        PackedBlocks(np.arange(5), block=9, stride=8, name="validation")


def test_concat_follows_the_row_order_of_a_shuffled_dataset():
    ds = Dataset.from_dict({"input_ids": [[1, 2], [3], [4, 5, 6]]}).select([2, 0, 1])
    assert concat_ids(ds).tolist() == [4, 5, 6, 1, 2, 3]
