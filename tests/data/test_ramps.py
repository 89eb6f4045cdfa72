"""Batch-size warmup and sequence-length warmup in the data pipeline: the ramp's points and
refusals, the ramped loader's order over one and two ranks, its resume inside the ramp, and the
cut of windows into shorter rows."""

from __future__ import annotations

import pytest
import torch

from zoo.config.errors import ConfigError
from zoo.config.facts.ramps import BatchWarmupLR, lr_multiplier, micro_batches, parse_points, ramped_lr, value_at
from zoo.config.schema.data import DataConfig
from zoo.data.collate.causal import collate_causal
from zoo.data.ramps import RampedLoader, cut_rows
from zoo.data.resumable import EpochShardSampler

RAMP = ((0, 2), (2, 4), (5, 8))  # global batch 2 for steps 0-1, 4 for steps 2-4, 8 from step 5


class Windows(torch.utils.data.Dataset):
    """Window i is [i, i+1, ..., i+T]: its first id names it."""

    def __init__(self, n: int, seq_len: int = 8) -> None:
        self.n, self.seq_len = n, seq_len

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.arange(i, i + self.seq_len + 1)


def _loader(rank: int = 0, world: int = 1, accumulation: int = 1, n: int = 64) -> RampedLoader:
    data = Windows(n)
    sampler = EpochShardSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=3, drop_last=True)
    return RampedLoader(
        data,
        sampler=sampler,
        micro=micro_batches(RAMP, world, accumulation),
        accumulation=accumulation,
        collate_fn=collate_causal,
        drop_last=True,
    )


def _ids(batch: dict) -> list[int]:
    return batch["input_ids"][:, 0].tolist()


def test_points_are_parsed_and_read_by_step():
    assert parse_points("k", [[0, 2], [2, 4], [5, 8]]) == RAMP
    assert parse_points("k", None) is None
    assert [value_at(RAMP, s) for s in range(7)] == [2, 2, 4, 4, 4, 8, 8]


@pytest.mark.parametrize(
    "value, fragment",
    [
        ([[0, 4], [3, 2]], "must rise strictly"),
        ([[0, 2], [0, 4]], "must rise strictly"),
        ([[1, 2], [3, 4]], "must start at step 0"),
        ([[0, 2, 3]], "two integers"),
        ([], "non-empty"),
        (5, "list of [step, value] points"),
    ],
)
def test_a_ramp_that_is_not_a_rising_list_of_points_is_refused(value, fragment):
    with pytest.raises(ConfigError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        parse_points("data.batch_warmup", value)


@pytest.mark.parametrize(
    "keys, fragment",
    [
        ({"batch_warmup": [[0, 4], [3, 16]], "global_batch_size": 8}, "must end at data.global_batch_size=8"),
        ({"seq_len_warmup": [[0, 16], [3, 128]], "seq_len": 64}, "must end at data.seq_len=64"),
        ({"seq_len_warmup": [[0, 24], [3, 64]], "seq_len": 64}, "the context 24 at step 0 does not divide"),
        ({"batch_warmup_lr": "sqrt"}, "needs a data.batch_warmup ramp"),
        ({"batch_warmup_lr": "cubic", "batch_warmup": [[0, 32]]}, "data.batch_warmup_lr"),
    ],
)
def test_data_config_refuses_a_ramp_that_does_not_fit_on_one_line(keys, fragment):
    with pytest.raises(ConfigError, match=fragment) as err:
        DataConfig(**keys)
    assert "\n" not in str(err.value)


def test_a_batch_that_does_not_split_into_micro_batches_and_ranks_is_refused():
    assert micro_batches(RAMP, 2, 1) == ((0, 1), (2, 2), (5, 4))
    with pytest.raises(ConfigError, match="the batch 2 at step 0 does not split into 2 micro-batch"):
        micro_batches(RAMP, 2, 2)


def test_each_step_takes_the_ramps_batch_of_the_next_positions_of_the_permutation():
    loader = _loader()
    order = list(iter(loader.sampler))  # the epoch's permutation (start 0)
    loader.sampler.start = 0
    batches = list(loader)
    sizes = [len(_ids(b)) for b in batches]
    assert sizes[:7] == [2, 2, 4, 4, 4, 8, 8] and set(sizes[5:]) == {8}
    assert len(batches) == len(loader) == 5 + (64 - 16) // 8
    assert [i for b in batches for i in _ids(b)] == order[: sum(sizes)]


def test_two_ranks_read_together_what_one_rank_reads():
    one = [_ids(b) for b in _loader()]
    ranks = [[_ids(b) for b in _loader(rank=r, world=2)] for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == len(one)
    for step, batch in enumerate(one):
        assert sorted(ranks[0][step] + ranks[1][step]) == sorted(batch)
        assert len(ranks[0][step]) == len(batch) // 2


def test_accumulation_keeps_a_steps_micro_batches_in_one_stage():
    loader = _loader(accumulation=2)
    sizes = [len(_ids(b)) for b in loader]
    assert sizes[:10] == [1, 1, 1, 1, 2, 2, 2, 2, 2, 2] and sizes[10] == 4


@pytest.mark.parametrize("stop", [1, 3, 6])
def test_a_loader_resumed_inside_the_ramp_continues_where_it_stopped(stop):
    straight = [_ids(b) for b in _loader()]
    first = _loader()
    it = iter(first)
    head = [_ids(next(it)) for _ in range(stop)]
    state = first.state_dict()
    resumed = _loader()
    resumed.load_state_dict(state)
    assert len(resumed) == len(straight)
    assert head + [_ids(b) for b in resumed] == straight


def test_a_finished_epoch_resumes_at_the_start_of_the_next_with_the_ramp_done():
    first = _loader(n=20)
    done = [_ids(b) for b in first]  # 2 + 2 + 4 + 4 + 4 = 16 examples; 4 left < 8
    assert [len(b) for b in done] == [2, 2, 4, 4, 4]
    resumed = _loader(n=20)
    resumed.load_state_dict(first.state_dict())
    nxt = [_ids(b) for b in resumed]
    assert resumed.sampler.epoch == 1 and [len(b) for b in nxt] == [8, 8]


def test_cut_rows_keeps_every_token_and_label_with_a_shorter_context():
    windows = [torch.arange(s, s + 17) for s in (0, 100)]
    batch = collate_causal(windows, eos_id=5)
    cut = cut_rows(batch, 4)
    assert cut["input_ids"].shape == cut["labels"].shape == cut["document_ids"].shape == (8, 4)
    assert torch.equal(cut["input_ids"].reshape(2, 16), batch["input_ids"])
    assert torch.equal(cut["labels"].reshape(2, 16), batch["labels"])  # each label kept, eos's masked one too
    plain = cut_rows(collate_causal(windows), 4)
    assert torch.equal(plain["labels"], plain["input_ids"] + 1)  # each row predicts its own next tokens
    assert cut_rows(batch, 16) is batch


def test_the_learning_rate_rule_scales_by_the_batch_share():
    assert lr_multiplier(RAMP, BatchWarmupLR.linear, 0) == 0.25
    assert lr_multiplier(RAMP, BatchWarmupLR.sqrt, 3) == 0.5**0.5
    assert lr_multiplier(RAMP, BatchWarmupLR.constant, 0) == 1.0
    f = ramped_lr(lambda step: 2.0, {"batch_warmup": [list(p) for p in RAMP], "batch_warmup_lr": "sqrt"})
    assert [f(s) for s in (0, 2, 5)] == [1.0, 2.0 * 0.5**0.5, 2.0]
    plain = lambda step: 1.0  # noqa: E731
    assert ramped_lr(plain, {"batch_warmup": None}) is plain


def test_a_ramp_stopped_on_one_rank_continues_on_two_with_the_same_global_batches():
    straight = [_ids(b) for b in _loader()]
    first = _loader()
    it = iter(first)
    head = [_ids(next(it)) for _ in range(3)]
    state = first.state_dict()
    ranks = []
    for r in (0, 1):
        resumed = _loader(rank=r, world=2)
        resumed.load_state_dict(state)
        ranks.append([_ids(b) for b in resumed])
    rest = [sorted(a + b) for a, b in zip(*ranks, strict=True)]
    assert head + rest == [sorted(batch) if i >= 3 else batch for i, batch in enumerate(straight)]


def test_a_ramp_resumed_with_another_accumulation_is_refused():
    first = _loader(accumulation=2)
    next(iter(first))
    with pytest.raises(ConfigError, match="gradient accumulation of 2 micro-batches per step; this run has 1"):
        _loader().load_state_dict(first.state_dict())
