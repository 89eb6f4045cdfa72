"""optim=muon under sharding (trainer=fsdp_cpu: FSDP2 over two gloo processes; HSDP's 2 x 2 mesh
is tests/training/distributed/test_hsdp.py's run, which carries Muon too), end to end through real processes and real files: each rank gathers
every matrix's update for the orthogonalisation and keeps its rows of the result, so with the
iteration in float32 the weights follow one process taking the whole batch to float32 rounding
(1e-5), and a run stopped and continued (momentum buffers and NorMuon's row moments in the
sharded checkpoint) ends bit for bit where the uninterrupted run ends."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.training.distributed.conftest import max_abs_diff, model_state, ok, summary
from zoo.training.checkpoint.files import read_checkpoint

RUN = [
    "data.max_examples=20",
    "data.global_batch_size=8",
    "model.dropout=0",
    "model.activation=swiglu",
    "scheduler.total_steps=4",
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "callbacks.checkpoint_every_n_steps=2",
    "trainer.limit_val_batches=1",
    "optim=muon",
    "optim.ns_precision=float32",  # two runs then differ by float32 rounding, not bfloat16's
    "optim.muon_variant=normuon",  # its row moments sharded and checkpointed beside the buffers
    "optim.ns_method=polar_express",
]
LAST = ("checkpoints", "last.ckpt")


def _stopped_and_continued(run: Path, *extra: str) -> None:
    """`extra`'s run stopped after 2 of its 4 steps, then the same command on to step 4."""
    ok(zoo_train(*tiny_overrides(run), *RUN, *extra, "trainer.max_steps=2"))
    assert read_checkpoint(run.joinpath(*LAST), weights=False)["global_step"] == 2
    ok(zoo_train(*tiny_overrides(run), *RUN, *extra))
    assert summary(run)["resumed_at_step"] == 2 and summary(run)["global_step"] == 4


@pytest.fixture(scope="module")
def one(tmp_path_factory) -> Path:
    """RUN on one process taking the whole batch (shared by the tests below)."""
    run = tmp_path_factory.mktemp("muon") / "one"
    ok(zoo_train(*tiny_overrides(run), *RUN))
    return run


@pytest.mark.slow
def test_fsdp_muon_follows_one_process_and_resumes_exactly(one, tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    ok(zoo_train(*tiny_overrides(straight), *RUN, "trainer=fsdp_cpu"))
    assert summary(straight)["world_size"] == 2
    diff = max_abs_diff(model_state(straight.joinpath(*LAST)), model_state(one.joinpath(*LAST)))
    assert diff <= 1e-5, diff
    _stopped_and_continued(resumed, "trainer=fsdp_cpu")
    a, b = model_state(straight.joinpath(*LAST)), model_state(resumed.joinpath(*LAST))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # a checkpoint holds NorMuon's row moments beside the momentum buffers
    state = read_checkpoint(one.joinpath(*LAST))["optimizer_states"][0]["state"]
    assert any("row_second_moment" in s for s in state.values())
