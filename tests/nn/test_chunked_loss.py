"""The chunked loss's memory-trace switch (`first_chunks_only`): inside it, only the first
chunks are computed; outside, every chunk again."""

from __future__ import annotations

import torch

from zoo.nn.chunked_loss import chunked_linear_cross_entropy, first_chunks_only


def test_inside_first_chunks_only_the_loss_sums_the_first_chunks_alone():
    g = torch.Generator().manual_seed(0)
    hidden, weight = torch.randn(40, 8, generator=g), torch.randn(11, 8, generator=g)
    targets = torch.randint(0, 11, (40,), generator=g)
    rows = torch.nn.functional.cross_entropy(hidden @ weight.t(), targets, reduction="none")  # (40,)
    with first_chunks_only(2):
        partial = chunked_linear_cross_entropy(hidden, weight, targets, chunk=8)
    torch.testing.assert_close(partial, rows[:16].sum() / 40)  # two chunks of 8 rows, over every row's count
    torch.testing.assert_close(chunked_linear_cross_entropy(hidden, weight, targets, chunk=8), rows.mean())
