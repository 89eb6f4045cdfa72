"""SIGTERM (schedulers, `timeout`, container runtimes) and SIGINT (Ctrl-C) stop a run the way the
next command can continue: last.ckpt saved at the next step boundary by every rank together,
failed.json with the reason and the command that resumes, exit status 128 + the signal, and the
resumed run ends bit-identical to one never stopped. A run is forked from the
test's (tests/forked.py: a process of its own, without another import of torch and Lightning);
the other ranks it launches start their interpreters as a user's do."""

from __future__ import annotations

import functools
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.cli.signal_in_validation import plant
from tests.forked import Forked, fork_tool
from tests.training.distributed.conftest import model_state, wait_for
from zoo.training.checkpoint.files import read_checkpoint

RUN = [
    "trainer.max_steps=120",
    "trainer.val_check_interval=40",
    "callbacks.checkpoint_every_n_steps=10",
    "model.dropout=0.1",
    "data.global_batch_size=4",
]


def _start(*args: str) -> Forked:
    """zoo-train started, not waited for (Popen's interface), forked as `zoo_train` forks it."""
    return Forked("train", *args)


def _stop(run, signum: int, *extra: str, then: int | None = None) -> subprocess.CompletedProcess:
    """Start zoo-train, send `signum` (and at once `then`, when given) to it once it has saved
    its first checkpoint, wait."""
    cmd = [*tiny_overrides(run), *RUN, *extra]
    proc = _start(*cmd)
    try:
        wait_for((run / "checkpoints" / "last.ckpt").exists, 180, "the first checkpoint", proc)
        proc.send_signal(signum)
        if then is not None:
            proc.send_signal(then)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.mark.parametrize("trainer", ["cpu", "ddp_cpu"])
@pytest.mark.slow
def test_sigterm_saves_records_exits_143_and_resumes_exactly(tmp_path, trainer):
    extra = [f"trainer={trainer}"]
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert zoo_train(*tiny_overrides(straight), *RUN, *extra).returncode == 0

    result = _stop(stopped, signal.SIGTERM, *extra)
    assert result.returncode == 128 + signal.SIGTERM, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("zoo-train:")]
    assert len(lines) == 1 and "SIGTERM" in lines[0] and "resume with: zoo-train" in lines[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    failed = json.loads((stopped / "failed.json").read_text())
    step = failed["step"]
    assert failed["signal"] == signal.SIGTERM and 0 < step < 120
    assert f"hydra.run.dir='{stopped}'" in shlex.split(failed["resume"])
    assert not (stopped / "summary.json").exists()
    saved = read_checkpoint(stopped / "checkpoints" / "last.ckpt")
    assert saved["global_step"] == step  # saved at the step it stopped, not the last periodic one
    if trainer == "ddp_cpu":  # the signal reached rank 0 only; both ranks stopped at the same step
        assert len(saved["callbacks"]["RngState"]["ranks"]) == 2

    again = zoo_train(*tiny_overrides(stopped), *RUN, *extra)  # the recorded command, in effect
    assert again.returncode == 0, again.stderr[-3000:]
    summary = json.loads((stopped / "summary.json").read_text())
    assert summary["resumed_at_step"] == step and summary["global_step"] == 120
    assert not (stopped / "failed.json").exists()  # the finished run's record is not contradicted
    a, b = model_state(straight / "checkpoints" / "last.ckpt"), model_state(stopped / "checkpoints" / "last.ckpt")
    assert all(torch.equal(a[k], b[k]) for k in a), "the resumed weights differ from the uninterrupted run"


@pytest.mark.slow
def test_a_stopped_job_of_a_sweep_recipe_resumes_with_the_command_it_records(tmp_path):
    """A recipe of the user's that sweeps (hydra.mode: MULTIRUN, in a -cd directory): the command
    recorded for a stopped job names the directory and the recipe and resumes the one job as a
    run (hydra.mode=RUN) in its own directory; without them it would compose another config, or
    start a new sweep."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "tiny_sweep.yaml").write_text(
        "defaults:\n  - config\n  - _self_\n\nhydra:\n  mode: MULTIRUN\n  sweeper:\n    params:\n      seed: 0\n"
    )
    sweep = tmp_path / "sweep"
    proc = _start("-cd", str(conf), "-cn", "tiny_sweep", *tiny_overrides(), *RUN, f"hydra.sweep.dir={sweep}")
    try:
        wait_for((sweep / "0" / "checkpoints" / "last.ckpt").exists, 180, "the job's first checkpoint", proc)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    failed = json.loads((sweep / "0" / "failed.json").read_text())
    words = shlex.split(failed["resume"])
    assert words[:5] == ["zoo-train", "-cd", str(conf), "-cn", "tiny_sweep"], failed["resume"]
    assert "hydra.mode=RUN" in words and f"hydra.run.dir='{sweep / '0'}'" in words and "seed=0" in words

    again = zoo_train(*words[1:])  # the recorded command, as the user would paste it
    assert again.returncode == 0, again.stderr[-3000:]
    summary = json.loads((sweep / "0" / "summary.json").read_text())
    assert summary["resumed_at_step"] == failed["step"] and summary["global_step"] == 120
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == ["0"]  # no second job, no new sweep


@pytest.mark.slow
def test_sigint_saves_and_exits_130(tmp_path):
    run = tmp_path / "run"
    result = _stop(run, signal.SIGINT)
    assert result.returncode == 128 + signal.SIGINT, result.stderr[-3000:]
    assert "stopped by SIGINT" in result.stderr and "Traceback" not in result.stderr
    failed = json.loads((run / "failed.json").read_text())
    assert read_checkpoint(run / "checkpoints" / "last.ckpt", weights=False)["global_step"] == failed["step"]


@pytest.mark.slow
def test_sigterm_in_the_final_validation_ends_like_one_in_training(tmp_path):
    """The final validation (a run that ended between validations) runs after Lightning's fit,
    where Lightning's own SIGTERM handler used to end the run with status 0 and no records. A
    SIGTERM there ends it at the batch it was in: last.ckpt at the final step, failed.json, exit
    143; the same command then validates that step and finishes."""
    run = tmp_path / "run"
    # no data.max_examples: the whole King James validation split, 200 batches of it a validation
    args = [
        o
        for o in tiny_overrides(run)
        if not o.startswith(
            ("data.max_examples", "trainer.limit_val_batches", "trainer.max_steps", "trainer.val_check")
        )
    ]
    args += ["trainer.max_steps=5", "trainer.val_check_interval=4", "trainer.limit_val_batches=200"]
    cmd = [sys.executable, "-m", "zoo.cli.train", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        for line in proc.stdout:  # the log's console lines
            seen.append(line)
            if "validating the final step 5" in line:
                proc.send_signal(signal.SIGTERM)
                break
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert any("validating the final step 5" in line for line in seen), "".join(seen)[-2000:]
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "Traceback" not in err
    failed = json.loads((run / "failed.json").read_text())
    assert failed["signal"] == signal.SIGTERM and failed["step"] == 5
    assert read_checkpoint(run / "checkpoints" / "last.ckpt", weights=False)["global_step"] == 5
    assert not (run / "summary.json").exists()
    again = zoo_train(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["global_step"] == 5 and "val/loss" in summary["metrics"]


@pytest.mark.slow
def test_a_second_signal_stops_at_once_with_records(tmp_path):
    """SIGTERM then Ctrl-C at once: the run stops where it is (a second signal does not wait for
    the step boundary), exit 130, failed.json naming the last checkpoint saved before and the
    resume command. It used to end in Lightning's KeyboardInterrupt handler: exit 1, no records."""
    run = tmp_path / "run"
    result = _stop(run, signal.SIGTERM, then=signal.SIGINT)
    err = result.stderr
    assert result.returncode in (128 + signal.SIGINT, 128 + signal.SIGTERM), err[-3000:]
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("zoo-train:")]
    assert len(lines) == 1 and "resume with: zoo-train" in lines[0], err[-2000:]
    failed = json.loads((run / "failed.json").read_text())
    assert failed["signal"] == result.returncode - 128 and failed["resume"]
    saved = read_checkpoint(run / "checkpoints" / "last.ckpt", weights=False)["global_step"]
    assert failed["step"] == saved  # the checkpoint failed.json names is the one on disk


def _val_rows(run) -> list[tuple[int, str]]:
    """metrics.csv's validation rows: (step, val/loss), in order."""
    import csv

    with open(run / "metrics.csv", newline="") as f:
        return [(int(float(r["step"])), r["val/loss"]) for r in csv.DictReader(f) if r.get("val/loss")]


@pytest.mark.slow
@pytest.mark.parametrize(
    "every, trainer, epoch_end",
    [(2, "cpu", False), (3, "cpu", False), (2, "ddp_cpu", False), (3, "cpu", True)],
    ids=["saved-inside-validation", "saved-before-validation", "ddp-saved-inside-validation", "at-an-epochs-end"],
)
def test_sigterm_in_an_inloop_validation_stops_at_its_batch_and_the_resume_runs_it_whole(
    tmp_path, every, trainer, epoch_end
):
    """A SIGTERM during the validation after step 3 ends the run at the next validation batch
    (not after the whole validation and another step), with exit 143 and last.ckpt as of step 3;
    the same command runs that validation whole first, then trains on: metrics.csv's validation
    rows and the final weights equal those of a run never stopped. `every=3`: last.ckpt was
    written at step 3 before the validation (Lightning alone would resume past the validation);
    `every=2`: it is written from inside the validation. Under ddp_cpu the signal reaches rank 0
    only; the ranks agree on it at a validation batch both have. `epoch_end`: four verses make
    epochs of 3 steps, so the validation stopped is the one at the first epoch's last batch (and
    one validation batch long)."""
    run_args = [
        "trainer.max_steps=9",
        "trainer.val_check_interval=3",
        "trainer.limit_val_batches=6",
        f"callbacks.checkpoint_every_n_steps={every}",
        "model.dropout=0.1",
        f"trainer={trainer}",
    ]
    if epoch_end:
        run_args.append("data.max_examples=4")  # 14 training windows: 3 batches of 4 an epoch
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert zoo_train(*tiny_overrides(straight), *run_args).returncode == 0

    # forked, with the signal planted in it (tests/cli/signal_in_validation.py); a second rank is
    # started by the launcher as zoo-train, without it: the signal reaches rank 0 only
    result = fork_tool(
        "train", *tiny_overrides(stopped), *run_args, before=functools.partial(plant, 3, 1 if epoch_end else 2)
    )
    assert result.returncode == 128 + signal.SIGTERM, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert "during the validation at step 3" in (stopped / "train.log").read_text()
    failed = json.loads((stopped / "failed.json").read_text())
    assert failed["step"] == 3 and failed["signal"] == signal.SIGTERM
    assert read_checkpoint(stopped / "checkpoints" / "last.ckpt", weights=False)["global_step"] == 3
    assert all(step < 2 for step, _ in _val_rows(stopped))  # the stopped validation wrote no row

    again = zoo_train(*tiny_overrides(stopped), *run_args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _val_rows(stopped) == _val_rows(straight)  # steps 3, 6, 9 (logged at 2, 5, 8), same values
    a, b = model_state(straight / "checkpoints" / "last.ckpt"), model_state(stopped / "checkpoints" / "last.ckpt")
    assert all(torch.equal(a[k], b[k]) for k in a), "the resumed weights differ from the uninterrupted run"


@pytest.mark.slow
def test_sigterm_while_the_run_prepares_ends_like_one_in_training(tmp_path, cli_here, monkeypatch):
    """A SentencePiece tokenizer trained on the whole King James Bible, nothing cached (seconds
    of preparation): a SIGTERM once the run says it is preparing its data ends it with exit 143,
    the one line naming the signal and the command that resumes, and failed.json (no step: no
    checkpoint yet). It used to end by the signal's default action: no line, no record. The
    recorded command then prepares again and finishes the run in the same directory."""
    run, cache = tmp_path / "run", tmp_path / "cache"
    args = [
        o
        for o in tiny_overrides(run)
        if not o.startswith(("data.max_examples", "tokenizer=", "model.vocab_size", "trainer.max_steps"))
    ]
    args += ["tokenizer=sentencepiece_bpe", "model.vocab_size=2000", "trainer.max_steps=3"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "zoo.cli.train", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, ZOO_CACHE=str(cache)),
    )
    seen = []
    try:
        for line in proc.stdout:  # the log's console lines
            seen.append(line)
            if "preparing the data" in line:
                proc.send_signal(signal.SIGTERM)
                break
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert any("preparing the data" in line for line in seen), "".join(seen)[-2000:] + err[-2000:]
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("zoo-train:")]
    assert len(lines) == 1 and "SIGTERM while the run was preparing" in lines[0], err[-2000:]
    assert "no checkpoint had been written yet; resume with: zoo-train" in lines[0]
    failed = json.loads((run / "failed.json").read_text())
    assert failed["signal"] == signal.SIGTERM and "step" not in failed
    assert failed["resume"] == lines[0].split("resume with: ", 1)[1]
    assert f"hydra.run.dir='{run}'" in shlex.split(failed["resume"])
    assert not (run / "checkpoints").exists() and not (run / "summary.json").exists()

    monkeypatch.setenv("ZOO_CACHE", str(cache))
    again = cli_here("train", *shlex.split(failed["resume"])[1:])  # the recorded command, as pasted
    assert again.returncode == 0, again.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["global_step"] == 3
    assert not (run / "failed.json").exists()


ROOT = Path(__file__).resolve().parents[2]


def _signal_at(point: str, when: str, signum: signal.Signals, *args: str) -> subprocess.CompletedProcess:
    """zoo-train ARGS with `signum` sent the first time the function `point` (MODULE:QUALNAME)
    is called, `when` before it runs or after it returns (tests/cli/signal_at.py)."""
    return subprocess.run(
        [sys.executable, "-m", "tests.cli.signal_at", point, when, signum.name[3:], *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def _one_line(result: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("zoo-train:")]
    assert len(lines) == 1, result.stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_before_the_run_is_claimed_ends_with_one_line_and_nothing_written(tmp_path, signum):
    """From the first line of main(): a signal while the command line is checked (before torch
    loads) ends the command with 128 + the signal and one line; no directory is made."""
    run = tmp_path / "run"
    result = _signal_at("zoo.cli.gate:check_command_line", "before", signum, *tiny_overrides(run))
    assert result.returncode == 128 + signum, result.stderr[-3000:]
    assert f"stopped by {signum.name} before a run directory was claimed" in _one_line(result)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "point, when, says, step",
    [
        ("zoo.cli.gate:claim_single", "after", "while the run was starting", None),
        # the first validation is Lightning's sanity check, before on_train_start: its own SIGTERM
        # handler ended the command there with status 0, no line and no record
        (
            "zoo.training.signals.interrupt:Interrupt.on_validation_start",
            "after",
            "before the first training step",
            None,
        ),
        ("zoo.training.finish:summarize_run", "before", "while the run's records were written", 6),
    ],
    ids=["right-after-the-claim", "in-the-sanity-check", "writing-the-records"],
)
def test_a_sigterm_outside_training_ends_with_records_and_the_resume_command(
    tmp_path, cli_here, point, when, says, step
):
    """A SIGTERM after the run directory is claimed and outside the steps of training (the
    second after the claim, Lightning setting up, the records after the final validation) ends
    like one in training: exit 143, the one line with the command that resumes, failed.json
    naming the step last.ckpt holds; that command then finishes the run. A SIGTERM right after
    the claim used to end the process by the signal's default action, with no line or record."""
    run = tmp_path / "run"
    result = _signal_at(point, when, signal.SIGTERM, *tiny_overrides(run))
    assert result.returncode == 128 + signal.SIGTERM, result.stderr[-3000:]
    line = _one_line(result)
    assert f"stopped by SIGTERM {says}" in line and "resume with: zoo-train" in line, line
    failed = json.loads((run / "failed.json").read_text())
    assert failed["signal"] == signal.SIGTERM and failed.get("step") == step
    assert failed["resume"] == line.split("resume with: ", 1)[1]
    assert not (run / "summary.json").exists()
    if point != "zoo.cli.gate:claim_single":
        return  # the others record the command a stop in training records; this one is read off the command line

    again = cli_here("train", *shlex.split(failed["resume"])[1:])  # the recorded command, as pasted
    assert again.returncode == 0, again.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["global_step"] == 6
    assert not (run / "failed.json").exists()


@pytest.mark.slow
def test_a_sigterm_once_the_summary_is_written_is_non_zero_and_keeps_the_finished_records(tmp_path):
    """Written whole, a run's summary is not contradicted: a SIGTERM as it is written waits for
    it, then ends the command with 143 and one line, and no failed.json is written."""
    run = tmp_path / "run"
    result = _signal_at("zoo.config.records.rundir:RunSummary.write", "before", signal.SIGTERM, *tiny_overrides(run))
    assert result.returncode == 128 + signal.SIGTERM, result.stderr[-3000:]
    assert f"stopped by SIGTERM after {run} finished; its records are kept" in _one_line(result)
    assert json.loads((run / "summary.json").read_text())["status"] == "finished"
    assert not (run / "failed.json").exists()
