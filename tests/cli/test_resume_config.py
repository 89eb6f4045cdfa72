"""A rerun in a run directory, or ckpt_path=, continues the run its checkpoint holds: a command
whose model, task, optimizer, schedule, data or tokenizer differ is refused on one line naming
the keys, before anything is written; trainer.* and how a step is computed may change."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import tiny_overrides
from zoo.training.checkpoint.files import read_checkpoint


@pytest.mark.slow
def test_a_changed_config_is_refused_and_the_run_is_left_alone(zoo_train_here, tmp_path):
    run = tmp_path / "run"
    first = zoo_train_here(*tiny_overrides(run))
    assert first.returncode == 0, first.stderr[-3000:]
    record = {
        name: (run / name).read_bytes()
        for name in ("config.yaml", ".hydra/config.yaml", ".hydra/overrides.yaml", "summary.json", "metrics.csv")
    }
    step = read_checkpoint(run / "checkpoints" / "last.ckpt")["global_step"]

    for change, key in [
        (["model/position=alibi", "optim.lr=0.01"], "model.position.kind"),
        (["optim.lr=0.01"], "optim.lr"),
        (["tokenizer=char"], "tokenizer.kind"),
        (["data.seq_len=16"], "data.seq_len"),
    ]:
        result = zoo_train_here(*tiny_overrides(run), *change, "trainer.max_steps=12")
        assert result.returncode == 2, (change, result.stderr[-2000:])
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "trained with another config" in lines[0] and key in lines[0], lines
        assert "Traceback" not in result.stderr
    # nothing of the finished run was rewritten, no failed.json beside its summary
    assert {name: (run / name).read_bytes() for name in record} == record
    assert not (run / "failed.json").exists()
    assert read_checkpoint(run / "checkpoints" / "last.ckpt")["global_step"] == step


@pytest.mark.slow
def test_trainer_keys_and_step_implementation_may_change_on_resume(zoo_train_here, tmp_path):
    run = tmp_path / "run"
    assert zoo_train_here(*tiny_overrides(run)).returncode == 0
    result = zoo_train_here(
        *tiny_overrides(run),
        "trainer.max_steps=9",
        "trainer.val_check_interval=9",
        "optim.implementation=foreach",
        "task.output_loss=logits",
        "data.num_workers=1",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_at_step"] == 6 and summary["global_step"] == 9
