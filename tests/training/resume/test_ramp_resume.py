"""Batch-size warmup and sequence-length warmup through zoo-train: a run stopped inside both ramps
and continued ends with the weights of the run that went straight, on one process and on two
gloo ranks sharing each global batch, with the tokens seen counted exactly; ramps that do not
fit are refused on one line."""

from __future__ import annotations

import json

import pytest
import torch

from tests.cli.conftest import missed, tiny_overrides, zoo_train
from tests.training.distributed.conftest import max_abs_diff, model_state
from zoo.training.checkpoint.files import read_checkpoint

# global batch 2 for steps 0-1, 4 for steps 2-4, 8 from step 5; context 8, then 16, then 32
RAMPS = [
    "data.global_batch_size=8",
    "data.batch_warmup=[[0,2],[2,4],[5,8]]",
    "data.batch_warmup_lr=sqrt",
    "data.seq_len_warmup=[[0,8],[3,16],[6,32]]",
    "scheduler.total_steps=8",
    "trainer.val_check_interval=4",
    "callbacks.checkpoint_every_n_steps=4",
]
TOKENS = (2 + 2 + 4 + 4 + 4 + 8 + 8 + 8) * 32  # steps 0-7 at data.seq_len=32: the ramp's examples


def _straight_and_split(tmp_path, train, *extra: str):
    """A straight run of 8 steps, and one stopped at step 3 (inside both ramps) and continued."""
    straight, split = tmp_path / "straight", tmp_path / "split"
    result = train(*tiny_overrides(straight), *RAMPS, *extra, "trainer.max_steps=8")
    assert result.returncode == 0, result.stderr[-3000:]
    first = train(*tiny_overrides(split), *RAMPS, *extra, "trainer.max_steps=3")
    assert first.returncode == 0, first.stderr[-3000:]
    stopped = read_checkpoint(split / "checkpoints" / "last.ckpt")
    assert stopped["global_step"] == 3
    loader = stopped["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]
    assert loader["micro"] == 3 and loader["epoch"] == 0  # inside the ramp, mid-epoch
    second = train(*tiny_overrides(split), *RAMPS, *extra, "trainer.max_steps=8", "ckpt_path=last")
    assert second.returncode == 0, second.stderr[-3000:]
    return straight, split


def _summary(run) -> dict:
    return json.loads((run / "summary.json").read_text())


def _equal(a, b) -> bool:
    wa, wb = model_state(a / "checkpoints" / "last.ckpt"), model_state(b / "checkpoints" / "last.ckpt")
    return all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.slow
def test_a_run_continued_inside_both_ramps_matches_the_straight_run(tmp_path, cli_here):
    # dropout on: the resumed run must also continue the random streams exactly
    straight, split = _straight_and_split(tmp_path, lambda *a: cli_here("train", *a), "model.dropout=0.1")
    assert _equal(straight, split), "resumed weights differ from the uninterrupted run"
    assert _summary(straight)["tokens_seen"] == _summary(split)["tokens_seen"] == TOKENS
    whole = tmp_path / "whole"  # the same batches with whole windows: the context ramp acts
    ramps = [a for a in RAMPS if not a.startswith("data.seq_len_warmup")]
    assert cli_here("train", *tiny_overrides(whole), *ramps, "model.dropout=0.1", "trainer.max_steps=8").returncode == 0
    assert _summary(whole)["tokens_seen"] == TOKENS
    assert not _equal(straight, whole)


@pytest.mark.slow
def test_two_gloo_ranks_split_each_ramped_batch_and_resume_inside_the_ramp_exactly(tmp_path, cli_here):
    """No dropout: two ranks draw other masks than one process, and the runs are compared."""
    one = tmp_path / "one"
    assert cli_here("train", *tiny_overrides(one), *RAMPS, "trainer.max_steps=8").returncode == 0
    straight, split = _straight_and_split(tmp_path, zoo_train, "trainer=ddp_cpu")
    assert _summary(straight)["world_size"] == 2
    assert _equal(straight, split), "resumed weights differ from the uninterrupted run under DDP"
    assert _summary(straight)["tokens_seen"] == _summary(split)["tokens_seen"] == _summary(one)["tokens_seen"] == TOKENS
    diff = max_abs_diff(
        model_state(one / "checkpoints" / "last.ckpt"), model_state(straight / "checkpoints" / "last.ckpt")
    )
    assert diff <= 1e-5, diff


@pytest.mark.parametrize(
    "args, fragment",
    [
        (
            ["task=masked_lm", "model=bert", "data.batch_warmup=[[0,2],[2,4]]", "data.global_batch_size=4"],
            "apply to task=causal_lm, not task=masked_lm",
        ),
        (
            ["trainer.devices=2", "trainer.accelerator=cpu", "trainer.strategy=ddp", "data.batch_warmup=[[0,1],[2,4]]"],
            "the batch 1 at step 0 does not split into 1 micro-batch(es) x 2 rank(s)",
        ),
        (["data.batch_warmup=[[0,4],[2,2]]"], "must rise strictly"),
    ],
    ids=["task", "ranks", "falling"],
)
def test_a_ramp_that_does_not_fit_is_refused_on_one_line(tmp_path, cli_here, args, fragment):
    result = cli_here("train", *tiny_overrides(tmp_path / "run"), *args)
    assert not missed(result, "train", fragment)
    assert not (tmp_path / "run" / "checkpoints").exists()
