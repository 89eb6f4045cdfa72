"""A run trained with data.document_mask=true: zoo-eval measures the checkpoint under the same
masking as the run's validation (the record holds data.document_mask), and a resume keeps it."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from tests.cli.conftest import tiny_overrides


@pytest.mark.slow
def test_eval_and_resume_keep_the_document_mask(tmp_path, cli_here):
    run = tmp_path / "run"
    trained = cli_here("train", *tiny_overrides(run), "data.document_mask=true")
    assert trained.returncode == 0, trained.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    last = run / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["hyper_parameters"]["extra"]["data"]["document_mask"] is True

    def evaluated(*args: str) -> dict:
        out = tmp_path / f"eval{len(args)}.json"
        # the run's validation: batches of 4 in order, its first 2 (trainer.limit_val_batches=2)
        result = cli_here("eval", f"ckpt={last}", "batch_size=4", "limit_batches=2", f"out={out}", *args)
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads(out.read_text())["metrics"]

    masked, unmasked = evaluated(), evaluated("data.document_mask=false")
    assert masked["loss"] == pytest.approx(summary["metrics"]["val/loss"], rel=1e-5)
    assert masked["bpb"] == pytest.approx(summary["metrics"]["val/bpb"], rel=1e-5)
    assert unmasked["bpb"] != pytest.approx(masked["bpb"], rel=1e-5)  # the mask changes what is measured

    changed = cli_here("train", *tiny_overrides(run), "trainer.max_steps=9")  # the mask left out: refused
    assert changed.returncode == 2 and "add data.document_mask=true" in changed.stderr
    resumed = cli_here("train", *tiny_overrides(run), "data.document_mask=true", "trainer.max_steps=9")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((run / "summary.json").read_text())["global_step"] == 9
    assert yaml.safe_load((run / "config.yaml").read_text())["data"]["document_mask"] is True
    assert torch.load(last, weights_only=True)["hyper_parameters"]["extra"]["data"]["document_mask"] is True


@pytest.mark.slow
def test_two_fsdp_ranks_on_the_cpu_validate_as_one_process(tmp_path, cli_here):
    """Each rank's batches carry their own document ids: two FSDP ranks train and validate what
    one process does (the same val/loss)."""
    from tests.cli.conftest import zoo_train

    one = cli_here("train", *tiny_overrides(tmp_path / "one"), "data.document_mask=true")
    two = zoo_train(
        *tiny_overrides(tmp_path / "two"), "data.document_mask=true", "trainer=fsdp_cpu", "trainer.devices=2"
    )
    assert one.returncode == 0 and two.returncode == 0, (one.stderr[-2000:], two.stderr[-2000:])
    losses = [
        json.loads((tmp_path / name / "summary.json").read_text())["metrics"]["val/loss"] for name in ("one", "two")
    ]
    assert losses[1] == pytest.approx(losses[0], rel=1e-4)
