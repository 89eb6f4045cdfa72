"""The resumable training loader: sharding that does not change the global batch, and a
position within the epoch that survives a restart."""

from __future__ import annotations

import pytest
import torch

from zoo.data.collate import MaskingCollator
from zoo.data.resumable import EpochShardSampler, ResumableLoader

N = 50  # examples; with drop_last the last few of each epoch are skipped


def _loader(world: int = 1, rank: int = 0, batch: int = 4, seed: int = 3, **kw) -> ResumableLoader:
    data = torch.arange(N)
    sampler = EpochShardSampler(data, num_replicas=world, rank=rank, seed=seed)
    return ResumableLoader(data, sampler=sampler, batch_size=batch, **kw)


def _epoch(loader, epoch: int) -> list[list[int]]:
    loader.sampler.set_epoch(epoch)
    return [b.tolist() for b in loader]


@pytest.mark.parametrize("world", [2, 4])
def test_ranks_together_see_the_global_batch_of_one_rank(world):
    global_batch = 8
    one = _epoch(_loader(batch=global_batch), 0)
    shards = [_epoch(_loader(world, r, batch=global_batch // world), 0) for r in range(world)]
    assert all(len(s) == len(one) for s in shards)
    for step, batch in enumerate(one):
        together = sorted(x for s in shards for x in s[step])
        assert together == sorted(batch)


def test_each_epoch_is_a_new_permutation_fixed_by_the_seed():
    a, b = _epoch(_loader(), 0), _epoch(_loader(), 1)
    assert a != b
    assert a == _epoch(_loader(), 0)
    assert a != _epoch(_loader(seed=4), 0)
    flat = [x for batch in a for x in batch]
    assert len(set(flat)) == len(flat) == (N // 4) * 4


@pytest.mark.parametrize("stop", [0, 3, 12])
def test_resumed_loader_yields_exactly_the_remaining_batches(stop):
    full = _epoch(_loader(), 2)
    first = _loader()
    first.sampler.set_epoch(2)
    it = iter(first)
    seen = [next(it).tolist() for _ in range(stop)]
    state = first.state_dict()
    assert state == {"epoch": 2, "batches": stop}

    resumed = _loader()
    resumed.load_state_dict(state)
    assert _epoch(resumed, 2) == full[stop:]
    assert seen + full[stop:] == full
    assert len(resumed) == len(full)  # the epoch's length, not what is left of it
    assert _epoch(resumed, 3) == _epoch(_loader(), 3)  # the next epoch starts from the top


def test_a_saved_position_from_another_epoch_is_ignored():
    loader = _loader()
    loader.load_state_dict({"epoch": 0, "batches": 5})
    assert _epoch(loader, 1) == _epoch(_loader(), 1)


def test_the_collate_function_learns_the_epoch():
    ids = torch.randint(6, 300, (N, 16), generator=torch.Generator().manual_seed(0))
    collate = MaskingCollator(300, seed=1)
    sampler = EpochShardSampler(ids, seed=0)
    loader = ResumableLoader(ids, sampler=sampler, batch_size=4, collate_fn=collate)
    sampler.set_epoch(5)
    next(iter(loader))
    assert collate.epoch == 5


def test_needs_its_sampler():
    with pytest.raises(TypeError, match="EpochShardSampler"):
        ResumableLoader(torch.arange(4), sampler=torch.utils.data.SequentialSampler(range(4)))
