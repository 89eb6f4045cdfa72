"""Hybrid sharding (trainer=hsdp_cpu: FSDP2 on a 2 x 2 mesh of four gloo CPU processes, two
replica groups each sharding the model over two ranks), end to end through real processes and
real files, in one run that carries a mixture of experts, Muon, an average of the weights and
gradient clipping: continuing a run that FSDP2 over four ranks stopped halfway, it trains to the
weights, average and routing statistics DDP over four ranks trains to, and its checkpoint is read
whole on one process. A replicate count the mesh cannot take is refused on one line."""

from __future__ import annotations

import pytest

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.training.distributed.conftest import MOE, max_abs_diff, model_state, ok, summary
from zoo.config.facts.ema import EMA_STATE, EMA_UPDATES
from zoo.training.checkpoint.files import read_checkpoint

# one run holding what sharding over a 2 x 2 mesh must carry: a mixture of experts (stacked
# expert weights sharded like any weight, routing statistics reduced over every rank), Muon
# (NorMuon's momentum buffers and row moments, each whole matrix gathered for the iteration, in
# float32 so two runs differ by float32's rounding), an average of the weights (its rows kept by
# each rank, gathered whole into a checkpoint), and gradient clipping (the norm over every shard)
RUN = [
    "data.max_examples=20",
    "data.global_batch_size=8",
    "model.dropout=0",
    *MOE,
    "model.activation=swiglu",
    "callbacks.routing_every=2",
    "optim=muon",
    "optim.ns_precision=float32",
    "optim.muon_variant=normuon",
    "optim.ns_method=polar_express",
    "optim.ema=0.8",
    "optim.ema_eval=both",
    "trainer.precision=32-true",
    "trainer.gradient_clip_val=0.05",
    "scheduler.total_steps=4",
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "callbacks.checkpoint_every_n_steps=2",
    "trainer.limit_val_batches=1",
]
LAST = ("checkpoints", "last.ckpt")


def _loads(run) -> list[float]:
    return [summary(run)["metrics"][f"train/moe_load/layer_0/expert_{e}"] for e in range(4)]


@pytest.mark.slow
def test_hsdp_two_by_two_continues_an_fsdp_run_to_what_ddp_on_four_ranks_trains(tmp_path):
    """DDP over four ranks trains RUN's 4 steps straight. The same command on FSDP2 over four ranks
    (four shards) stops after step 2, and the same command on the 2 x 2 mesh (trainer=hsdp_cpu:
    two shards, replicated) continues it: the sharded checkpoint's weights, Muon's state and the
    average are cut into the mesh's rows again. It ends with DDP's weights, average, validation losses and routing statistics
    (float32 rounding), and its own checkpoint, written in shards, reads whole on one process."""
    ddp, hsdp = tmp_path / "ddp", tmp_path / "hsdp"
    ok(zoo_train(*tiny_overrides(ddp), *RUN, "trainer=ddp_cpu", "trainer.devices=4"))
    # FSDP2 over the same four ranks (a 1-D mesh: four shards), so each rank routes the tokens its
    # DDP rank routes: a mixture's balancing loss is taken over a rank's own tokens
    ok(zoo_train(*tiny_overrides(hsdp), *RUN, "trainer=fsdp_cpu", "trainer.devices=4", "trainer.max_steps=2"))
    assert read_checkpoint(hsdp.joinpath(*LAST), weights=False)["global_step"] == 2
    ok(zoo_train(*tiny_overrides(hsdp), *RUN, "trainer=hsdp_cpu"))
    log = (hsdp / "train.log").read_text()
    assert "trainer.strategy=hsdp: 2 replica(s), each sharded over 2 rank(s)" in log
    assert "built on the meta device; rank 0 holds" in log
    # the checkpoint at step 4: shard files (one per rank of a replica group), read whole here
    assert len(list(hsdp.joinpath(*LAST).glob("*.distcp"))) >= 2
    s_hsdp, s_ddp = summary(hsdp), summary(ddp)
    assert s_hsdp["resumed_at_step"] == 2 and s_hsdp["global_step"] == s_ddp["global_step"] == 4
    assert s_hsdp["world_size"] == s_ddp["world_size"] == 4
    ours, theirs = read_checkpoint(hsdp.joinpath(*LAST)), read_checkpoint(ddp.joinpath(*LAST))
    assert max_abs_diff(model_state(hsdp.joinpath(*LAST)), model_state(ddp.joinpath(*LAST))) <= 1e-5
    # a checkpoint holds NorMuon's row moments beside the momentum buffers (the state the continued
    # run read back, which its weights above depend on)
    assert any("row_second_moment" in s for s in theirs["optimizer_states"][0]["state"].values())
    # the average: whole (not a shard), four updates, DDP's to float32 rounding
    assert ours[EMA_UPDATES] == theirs[EMA_UPDATES] == 4
    assert all(t.shape == theirs[EMA_STATE][k].shape for k, t in ours[EMA_STATE].items())
    assert max_abs_diff(ours[EMA_STATE], theirs[EMA_STATE]) <= 1e-5
    for metric in ("val/loss", "val_ema/loss"):
        assert s_hsdp["metrics"][metric] == pytest.approx(s_ddp["metrics"][metric], abs=1e-4), metric
    # the routing statistics, reduced over the four ranks
    assert _loads(hsdp) == pytest.approx(_loads(ddp), abs=1e-5)
    assert sum(_loads(hsdp)) == pytest.approx(1.0, abs=1e-6)


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
