"""The value residual, value embeddings and hyper-connections together, end to end through real
processes: FSDP2 over two gloo CPU processes (the value tables and mixing weights in the root
unit, each block's hyper-connections in its own) ends at the weights DDP over gloo ends at, and
a run killed right after a checkpoint resumes to the weights of a run never stopped, bit for
bit. The contract's resume test covers the value residual and hyper-connections kind by kind
(tests/contract/test_axes_resume.py); value embeddings are a count, no axis of kinds, so they
are resumed here."""

from __future__ import annotations

import json
import subprocess

import pytest
import torch

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.forked import fork_tool
from tests.training.checkpoint.kill_after_save import install
from tests.training.distributed.conftest import max_abs_diff, model_state

OPTIONS = [
    "model.n_layers=2",
    "model/value_residual=learned",
    "model.value_embeds=1",
    "model/hyper_connections=dynamic",
    "model.residual_streams=2",
]
RUN = [
    "data.max_examples=20",
    "data.global_batch_size=8",
    "scheduler.total_steps=4",
    "trainer.max_steps=4",
    "trainer.val_check_interval=4",
    "callbacks.checkpoint_every_n_steps=2",
]


def _ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow
def test_fsdp_ends_where_ddp_ends_with_the_residual_options(tmp_path):
    fsdp, ddp = tmp_path / "fsdp", tmp_path / "ddp"
    _ok(zoo_train(*tiny_overrides(fsdp), *RUN, *OPTIONS, "trainer=fsdp_cpu"))
    _ok(zoo_train(*tiny_overrides(ddp), *RUN, *OPTIONS, "trainer=ddp_cpu"))
    sharded, replicated = (
        model_state(fsdp / "checkpoints" / "last.ckpt"),
        model_state(ddp / "checkpoints" / "last.ckpt"),
    )
    for part in ("values.tables.0.weight", "values.residual_lambdas", "values.embed_lambdas", "hyper.0.alpha_fn"):
        assert any(part in name for name in sharded), part
    diff = max_abs_diff(sharded, replicated)
    assert diff <= 1e-5, diff
    start = torch.full_like(sharded["model.decoder.values.embed_lambdas"], 0.5)
    assert not torch.equal(sharded["model.decoder.values.embed_lambdas"], start)  # they trained


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_uninterrupted_weights(tmp_path, cli_here):
    args = [*RUN, "trainer.max_steps=4", *OPTIONS]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    _ok(cli_here("train", *tiny_overrides(straight), *args))
    stopped = fork_tool(
        "train", *tiny_overrides(killed), *args, before=lambda: install(2, "last.ckpt", "on_train_batch_end")
    )
    assert stopped.returncode == -9, stopped.stderr[-3000:]
    _ok(cli_here("train", *tiny_overrides(killed), *args))
    assert json.loads((killed / "summary.json").read_text())["resumed_at_step"] == 2
    a, b = model_state(straight / "checkpoints" / "last.ckpt"), model_state(killed / "checkpoints" / "last.ckpt")
    assert a.keys() == b.keys() and any("values.tables" in name for name in a)
    assert all(torch.equal(a[k], b[k]) for k in a), "the resumed weights differ"
