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
        ("callbacks.downstream_limit=0", "callbacks.downstream_limit must be a number of examples per task"),
        ("callbacks.downstream_limit=inf", "callbacks.downstream_limit must be a number of examples per task"),
        ("callbacks.downstream_limit=nan", "callbacks.downstream_limit must be a number of examples per task"),
        ("callbacks.downstream_limit=2.5", "callbacks.downstream_limit=2.5: give a whole number"),
    ],
)
def test_bad_settings_are_refused_on_one_line(override, refusal):
    from zoo.config.errors import ConfigError
    from zoo.config.schema.train import CallbacksConfig

    key, value = override.split("=", 1)
    name = key.split(".", 1)[1]
    parsed = [v for v in value.strip("[]").split(",")] if value.startswith("[") else float(value)
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


@pytest.mark.slow  # a process of its own (the Hub's address is read at import); the harness indexes its tasks
def test_a_hub_task_without_the_hub_is_refused_before_training(tmp_path):
    """It used to fail at the first validation, after training, in a long traceback."""
    from tests.cli.conftest import zoo_train

    unreachable = {
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_HUB_OFFLINE": "0",
        "HF_DATASETS_OFFLINE": "0",
    }  # a closed port
    run = tmp_path / "run"
    done = zoo_train(*tiny_overrides(run), "callbacks.downstream=[arc_easy]", env=unreachable)
    assert done.returncode == 1
    lines = [ln for ln in done.stderr.strip().splitlines() if ln.startswith("zoo-train")]
    assert len(lines) == 1 and "harness task(s) arc_easy read their datasets from the Hugging Face Hub" in lines[0]
    assert "Retrying" not in done.stderr and "Traceback" not in done.stderr
    assert not (run / "checkpoints").exists() and "arc_easy" in json.loads((run / "failed.json").read_text())["error"]


@pytest.mark.slow  # a signal needs a process of its own
def test_a_stop_during_scoring_names_the_best_checkpoint_it_has(tmp_path):
    """A SIGTERM while the tasks are scored, with no step boundary within stop_grace_s, stops at
    once; before any last.ckpt was due the run has best-3.ckpt from its validation, and the
    record names it (it said "no checkpoint had been written yet")."""
    import subprocess
    import sys

    run = tmp_path / "run"
    args = [a for a in tiny_overrides(run) if not a.startswith("callbacks.checkpoint_every_n_steps")]
    # the signal is sent as the scoring starts (tests/cli/signal_at.py), not after a guessed sleep
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.cli.signal_at",
            "zoo.harness.run:evaluate_tasks",
            "before",
            "TERM",
            *args,
            "callbacks.checkpoint_every_n_steps=100",
            "callbacks.downstream=[kjv_cloze,kjv_next_verse]",
            "callbacks.downstream_limit=null",  # every example: scoring takes seconds
            "callbacks.downstream_every=6",  # first scored at step 6, when best-3.ckpt is on disk
            "callbacks.stop_grace_s=0.01",  # scoring outlasts it on any machine
            "trainer.max_steps=20",
        ],
        capture_output=True,
        text=True,
        timeout=360,
    )
    best = run / "checkpoints" / "best-3.ckpt"
    err = process.stderr
    assert process.returncode == 143
    assert not (run / "checkpoints" / "last.ckpt").exists()
    failure = json.loads((run / "failed.json").read_text())
    assert f"{best} holds step 3, the last one saved" in failure["error"] and failure["step"] == 3
    (line,) = [ln for ln in err.splitlines() if ln.startswith("zoo-train:")]
    assert f"{best} holds step 3" in line and "no checkpoint" not in line
