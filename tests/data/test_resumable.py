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


@pytest.mark.parametrize("epoch", [0, 2])
@pytest.mark.parametrize("stop", [0, 3, 11])  # of 12 batches
def test_resumed_loader_yields_exactly_the_remaining_batches(stop, epoch):
    full = _epoch(_loader(), epoch)
    first = _loader()
    first.sampler.set_epoch(epoch)
    it = iter(first)
    seen = [next(it).tolist() for _ in range(stop)]
    state = first.state_dict()
    assert state == {"epoch": epoch, "batches": stop, "examples": stop * 4}

    # as Lightning resumes: a fresh loader (sampler at epoch 0), load_state_dict, then iter()
    # before the samplers' epoch is set again
    resumed = _loader()
    resumed.load_state_dict(state)
    rest = [b.tolist() for b in resumed]
    assert rest == full[stop:]
    assert seen + rest == full
    assert len(resumed) == len(full)  # the epoch's length, not what is left of it
    assert _epoch(resumed, epoch + 1) == _epoch(_loader(), epoch + 1)  # the next one from the top


def test_a_finished_epoch_resumes_at_the_next_one():
    loader = _loader()
    loader.sampler.set_epoch(1)
    batches = sum(1 for _ in loader)
    resumed = _loader()
    resumed.load_state_dict(loader.state_dict())
    assert resumed.sampler.epoch == 2
    assert [b.tolist() for b in resumed] == _epoch(_loader(), 2)
    assert batches == len(loader)


def test_a_resume_on_another_number_of_ranks_skips_the_same_examples():
    """Saved by one rank with batch 8 after 3 steps (24 examples); resumed on two ranks with
    batch 4 each: together they skip the same 24 examples of the permutation."""
    one = _loader(batch=8)
    one.sampler.set_epoch(1)
    it = iter(one)
    trained = [x for _ in range(3) for x in next(it).tolist()]
    state = one.state_dict()
    rest = []
    for rank in range(2):
        shard = _loader(world=2, rank=rank, batch=4)
        shard.load_state_dict(state)
        rest += [x for b in shard for x in b.tolist()]
    everything = [x for b in _epoch(_loader(batch=8), 1) for x in b]
    assert sorted(trained + rest) == sorted(everything)
    assert not set(trained) & set(rest)


@pytest.mark.parametrize("world", [2, 3])
def test_a_multi_rank_loader_saves_the_examples_of_every_rank_and_resumes_exactly(world):
    """W ranks of batch 4 stop after 3 steps: the saved position is 3 x 4 x W examples of the
    job, and each rank, resumed on W ranks, yields exactly the batches it had not reached."""
    for rank in range(world):
        full = _epoch(_loader(world=world, rank=rank), 1)
        first = _loader(world=world, rank=rank)
        first.sampler.set_epoch(1)
        it = iter(first)
        seen = [next(it).tolist() for _ in range(3)]
        state = first.state_dict()
        assert state == {"epoch": 1, "batches": 3, "examples": 3 * 4 * world}
        resumed = _loader(world=world, rank=rank)
        resumed.load_state_dict(state)
        assert [b.tolist() for b in resumed] == full[3:]
        assert seen == full[:3]


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


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("world", [1, 2, 3])
def test_the_sampler_deals_out_torchs_distributed_sampler_order(world, shuffle):
    """The index tensor handed out in chunks is the order of torch's DistributedSampler (same
    permutation, same shard), from any start."""
    from torch.utils.data import DistributedSampler

    for n in (10, 1001, 200_003):
        for rank in range(world):
            ours = EpochShardSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle, seed=5)
            ref = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle, seed=5, drop_last=True)
            for epoch in (0, 3):
                ours.set_epoch(epoch)
                ref.set_epoch(epoch)
                expected = list(ref)
                assert list(ours) == expected
                assert len(ours) == len(expected)
                ours.start = min(7, len(expected))
                assert list(ours) == expected[ours.start :]
                assert len(ours) == len(expected) - ours.start  # what is left to hand out
                ours.start = 0
    # no seed given: torch's default seed, the same permutation
    ours, ref = (
        EpochShardSampler(range(50), num_replicas=world),
        DistributedSampler(range(50), num_replicas=world, rank=0, drop_last=True),
    )
    assert list(ours) == list(ref)


def test_the_evaluation_sampler_reads_each_example_once_over_the_ranks():
    """ValidationShardSampler outside a process group is one rank reading everything, in order;
    its shards (as rank r of W sees them) interleave and cover each example exactly once, no
    padding."""
    from zoo.data.resumable import ValidationShardSampler

    for n in (1, 7, 10):
        sampler = ValidationShardSampler(range(n))
        assert list(sampler) == list(range(n)) and len(sampler) == n
        for world in (2, 3):
            shards = []
            for rank in range(world):
                sampler._shard = lambda rank=rank, world=world: (rank, world)
                shards.append(list(sampler))
                assert len(sampler) == len(shards[-1]) == len(range(rank, n, world))
            assert sorted(i for shard in shards for i in shard) == list(range(n))


@pytest.mark.parametrize("n, world, batch", [(1, 2, 4), (7, 2, 2), (9, 2, 4), (10, 3, 3), (12, 4, 3), (2, 4, 1)])
def test_even_batches_give_every_rank_rank_zeros_number_and_count_each_example_once(n, world, batch):
    """Under a sharded model every rank runs as many validation batches as rank 0; the real
    ones cover each example once, the rest are marked filler."""
    from torch.utils.data import DataLoader

    from zoo.data.even_batches import EvenBatches, is_filler
    from zoo.data.resumable import ValidationShardSampler

    data = [{"x": torch.tensor([i])} for i in range(n)]

    def collate(rows):
        return {"x": torch.cat([r["x"] for r in rows])}

    seen, counts = [], set()
    for rank in range(world):
        sampler = ValidationShardSampler(data)
        sampler._shard = lambda rank=rank: (rank, world)
        even = EvenBatches(DataLoader(data, batch_size=batch, sampler=sampler, collate_fn=collate), rank, world)
        batches = list(even)
        counts.add((len(even), len(batches)))
        seen += [int(i) for b in batches if not is_filler(b) for i in b["x"]]
        assert all(
            is_filler(b)
            for b in batches[len(range(rank, n, world)) // batch + bool(len(range(rank, n, world)) % batch) :]
        )
    assert len(counts) == 1 and len({c for pair in counts for c in pair}) == 1
    assert sorted(seen) == list(range(n))
    # without a place given and outside a process group: one rank, the loader's own batches
    alone = EvenBatches(DataLoader(data, batch_size=batch, sampler=ValidationShardSampler(data), collate_fn=collate))
    assert len(alone) == len(list(alone)) == -(-n // batch) and not any(is_filler(b) for b in alone)
