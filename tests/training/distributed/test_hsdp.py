"""Hybrid sharding (trainer=hsdp_cpu: FSDP2 on a 2 x 2 mesh of four gloo CPU processes, two
replica groups each sharding the model over two ranks), end to end through real processes and
real files: it trains to the weights DDP over four ranks trains to, a run stopped halfway and
continued ends there too, and its checkpoint is read whole on one process."""

from __future__ import annotations

import pytest

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.training.distributed.conftest import max_abs_diff, model_state, ok, summary
from zoo.training.checkpoint.files import read_checkpoint

RUN = [
    "data.max_examples=20",
    "data.global_batch_size=8",
    "model.dropout=0",
    "scheduler.total_steps=8",
    "trainer.max_steps=8",
    "trainer.val_check_interval=4",
    "callbacks.checkpoint_every_n_steps=4",
    "trainer.gradient_clip_val=0.05",
    "trainer.limit_val_batches=1",
]
LAST = ("checkpoints", "last.ckpt")


@pytest.mark.slow
def test_hsdp_two_by_two_equals_ddp_on_four_ranks_and_resumes(tmp_path):
    ddp, hsdp = tmp_path / "ddp", tmp_path / "hsdp"
    ok(zoo_train(*tiny_overrides(ddp), *RUN, "trainer=ddp_cpu", "trainer.devices=4"))
    ok(zoo_train(*tiny_overrides(hsdp), *RUN, "trainer=hsdp_cpu", "trainer.max_steps=4"))
    log = (hsdp / "train.log").read_text()
    assert "trainer.strategy=hsdp: 2 replica(s), each sharded over 2 rank(s)" in log
    assert "built on the meta device; rank 0 holds" in log
    # the checkpoint at step 4: two shard files (one per rank of a replica group), read whole here
    assert len(list(hsdp.joinpath(*LAST).glob("*.distcp"))) >= 2
    assert read_checkpoint(hsdp.joinpath(*LAST), weights=False)["global_step"] == 4
    ok(zoo_train(*tiny_overrides(hsdp), *RUN, "trainer=hsdp_cpu"))  # the same command on to step 8
    s_hsdp, s_ddp = summary(hsdp), summary(ddp)
    assert s_hsdp["resumed_at_step"] == 4 and s_hsdp["global_step"] == s_ddp["global_step"] == 8
    assert s_hsdp["world_size"] == s_ddp["world_size"] == 4
    diff = max_abs_diff(model_state(hsdp.joinpath(*LAST)), model_state(ddp.joinpath(*LAST)))
    assert diff <= 1e-5, diff
    assert s_hsdp["metrics"]["val/loss"] == pytest.approx(s_ddp["metrics"]["val/loss"], abs=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra, words",
    [
        (["trainer=hsdp_cpu", "trainer.replicate=3"], "trainer.replicate=3 must divide the 4 devices"),
        (["trainer=ddp_cpu", "+trainer.replicate=2"], "trainer.replicate=2 applies to trainer.strategy=hsdp only"),
        (["trainer=hsdp_cpu", "trainer.replicate=0"], "trainer.replicate must be an integer >= 1"),
    ],
)
def test_a_replicate_count_hsdp_cannot_run_is_refused_on_one_line(tmp_path, extra, words):
    result = zoo_train(*tiny_overrides(tmp_path / "run"), *extra)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert words in result.stderr, result.stderr[-2000:]
