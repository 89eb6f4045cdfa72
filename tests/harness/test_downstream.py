"""`callbacks.downstream`: task scores during training, logged like the validation metrics, the
last in summary.json, the history kept across a resume, the training itself unchanged."""

from __future__ import annotations

import csv
import json

import pytest
import torch

pytest.importorskip("lm_eval")

from tests.cli.conftest import tiny_overrides  # noqa: E402

DOWNSTREAM = ["callbacks.downstream=[kjv_cloze,kjv_next_verse]", "callbacks.downstream_limit=3"]


def _scored_steps(run) -> list[int]:
    rows = csv.DictReader((run / "metrics.csv").open())
    return [int(r["step"]) for r in rows if r.get("harness/kjv_next_verse/acc")]


@pytest.mark.slow
def test_task_scores_at_each_validation_reach_the_tracker_and_the_summary(tmp_path, cli_here):
    plain, scored = tmp_path / "plain", tmp_path / "scored"
    assert cli_here("train", *tiny_overrides(plain)).returncode == 0
    done = cli_here("train", *tiny_overrides(scored), *DOWNSTREAM)
    assert done.returncode == 0, done.stderr[-3000:]
    val_steps = [int(r["step"]) for r in csv.DictReader((scored / "metrics.csv").open()) if r.get("val/loss")]
    assert _scored_steps(scored) == val_steps == [2, 5]  # val_check_interval=3 of 6 steps
    summary = json.loads((scored / "summary.json").read_text())["metrics"]
    assert 0.0 <= summary["harness/kjv_next_verse/acc"] <= 1.0 and "harness/kjv_cloze/acc" in summary
    # scoring draws no random number of the run's: the same losses as the run without it
    assert summary["val/loss"] == json.loads((plain / "summary.json").read_text())["metrics"]["val/loss"]


@pytest.mark.slow
def test_every_n_steps_and_a_resume_keeps_the_history(tmp_path, cli_here):
    run = tmp_path / "run"
    first = cli_here("train", *tiny_overrides(run), *DOWNSTREAM, "callbacks.downstream_every=2")
    assert first.returncode == 0, first.stderr[-3000:]
    assert _scored_steps(run) == [1, 3, 5]
    again = cli_here(
        "train",
        *tiny_overrides(run),
        *DOWNSTREAM,
        "callbacks.downstream_every=2",
        "trainer.max_steps=9",
        "ckpt_path=last",
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert _scored_steps(run) == [1, 3, 5, 7, 8]  # step 8: the last, scored at the end
    state = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["callbacks"]["Downstream"]
    assert [h["step"] for h in state["history"]] == [1, 3, 5, 7, 8]
    assert (
        json.loads((run / "summary.json").read_text())["metrics"]["harness/kjv_cloze/acc"]
        == state["last"]["harness/kjv_cloze/acc"]
    )


@pytest.mark.parametrize(
    "override, refusal",
    [
        ("callbacks.downstream=[kjv_cloze,kjv_cloze]", "must name each task once"),
        ("callbacks.downstream_every=0", "callbacks.downstream_every must be >= 1"),
        ("callbacks.downstream_limit=0", "callbacks.downstream_limit must be > 0"),
    ],
)
def test_bad_settings_are_refused_on_one_line(override, refusal):
    from zoo.config.errors import ConfigError
    from zoo.config.schema.train import CallbacksConfig

    key, value = override.split("=", 1)
    name = key.split(".", 1)[1]
    parsed = [v for v in value.strip("[]").split(",")] if value.startswith("[") else int(value)
    with pytest.raises(ConfigError, match=refusal):
        CallbacksConfig(**{name: parsed})


@pytest.mark.slow  # an unknown name: the harness indexes its own thousands of tasks
def test_a_task_without_a_decoder_or_an_unknown_task_is_refused_before_training(tmp_path, cli_here):
    masked = cli_here(
        "train", *tiny_overrides(tmp_path / "a"), "model=bert", "task=masked_lm", "callbacks.downstream=[kjv_cloze]"
    )
    assert masked.returncode == 2
    assert "callbacks.downstream scores continuations; task=masked_lm has no decoder" in masked.stderr
    unknown = cli_here("train", *tiny_overrides(tmp_path / "b"), "callbacks.downstream=[kjv_clozee]")
    assert unknown.returncode == 2 and "harness task 'kjv_clozee' is not known" in unknown.stderr
    assert not (tmp_path / "b" / "checkpoints").exists()
