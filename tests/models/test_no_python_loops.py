"""The training forward pass has no Python loop over heads or positions: the number of tensor
operations it dispatches does not change with the number of heads or the sequence length."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import zoo
from tests.conftest import FAMILIES, POSITIONS, tiny


class CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def ops(family, position, n_heads, T):
    model = zoo.build_model(tiny(family, position, d_model=32, n_heads=n_heads, max_seq_len=64))
    ids = torch.randint(0, 37, (2, T))
    kwargs = {"decoder_input_ids": ids} if family == "encoder_decoder" else {}
    with CountOps() as counter:
        model(ids, **kwargs).logits.sum().backward()
    return counter.count


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_op_count_is_independent_of_heads_and_length(family, position):
    base = ops(family, position, 2, 8)
    assert base > 0
    assert ops(family, position, 4, 8) == base
    assert ops(family, position, 2, 24) == base
