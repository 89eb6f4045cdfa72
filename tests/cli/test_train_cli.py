"""`zoo-train` through a real subprocess: each task, the run directory, resume, sweeps,
`--cfg job`, and clear one-line errors for bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

import zoo
from tests.cli.conftest import tiny_overrides, zoo_train

TASK_ARGS = {
    "causal_lm": ["model=gpt"],
    "masked_lm": ["model=bert"],
    "seq2seq": ["model=transformer"],
    "classification": ["model=bert", "task=classification"],
}


@pytest.mark.parametrize("task", sorted(TASK_ARGS))
@pytest.mark.slow
def test_each_task_trains_and_writes_its_run_directory(task, tmp_path):
    run = tmp_path / "run"
    result = zoo_train(*TASK_ARGS[task], *tiny_overrides(run, enc_dec=task == "seq2seq"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"run directory: {run}" in result.stdout
    for name in ("config.yaml", "summary.json", "metrics.csv", "checkpoints/last.ckpt", "tokenizer"):
        assert (run / name).exists(), name
    summary = json.loads((run / "summary.json").read_text())
    assert summary["global_step"] == 6 and summary["task"] == task
    assert summary["tokens_seen"] > 0 and summary["tokens_per_s"] > 0
    assert summary["model"]["total_params"] > 0
    assert summary["metrics"]["val/loss"] > 0
    if task == "seq2seq":
        assert "val/bleu" in summary["metrics"] and "val/exact_match" in summary["metrics"]
    # the checkpoint is plain data
    data = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert data["hyper_parameters"]["task"]["kind"] == task
    assert "zoo_tokenizer" in data
    header = (run / "metrics.csv").read_text().splitlines()[0]
    assert "train/loss" in header and "val/loss" in header


@pytest.mark.slow
def test_tensorboard_logger_and_bf16_precision(tmp_path):
    run = tmp_path / "run"
    result = zoo_train(*tiny_overrides(run), "logger=tensorboard", "trainer.precision=bf16-mixed")
    assert result.returncode == 0, result.stderr[-3000:]
    assert list((run / "tb").glob("events.out.tfevents.*"))
    assert json.loads((run / "summary.json").read_text())["metrics"]["val/loss"] > 0


@pytest.mark.slow
def test_resume_continues_from_last_checkpoint(tmp_path):
    run = tmp_path / "run"
    first = zoo_train(*tiny_overrides(run))
    assert first.returncode == 0, first.stderr[-3000:]
    step6 = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    again = zoo_train(*tiny_overrides(run), "trainer.max_steps=9", "ckpt_path=last")
    assert again.returncode == 0, again.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_from"].endswith("last.ckpt")
    assert summary["global_step"] == 9
    step9 = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert step9["global_step"] == 9 and step6["global_step"] == 6
    assert step9["hyper_parameters"] == step6["hyper_parameters"]
    # rerunning the same command in the same run directory resumes automatically
    third = zoo_train(*tiny_overrides(run), "trainer.max_steps=12")
    assert third.returncode == 0, third.stderr[-3000:]
    assert json.loads((run / "summary.json").read_text())["global_step"] == 12
    # metrics.csv keeps the rows of every segment, each training step once
    import csv

    rows = list(csv.DictReader((run / "metrics.csv").open()))
    train_steps = [int(r["step"]) for r in rows if r.get("train/loss")]
    assert train_steps == sorted(set(train_steps)) and train_steps[0] < 6 and train_steps[-1] >= 9


@pytest.mark.slow  # starts a Python process that imports zoo
def test_cfg_job_prints_the_config_that_zoo_compose_returns(tmp_path):
    result = zoo_train("--cfg", "job", "model=llama", "model/position=alibi")
    assert result.returncode == 0, result.stderr
    printed = yaml.safe_load(result.stdout)
    composed = zoo.compose(["model=llama", "model/position=alibi"])
    from omegaconf import OmegaConf

    expected = OmegaConf.to_container(composed, resolve=False, enum_to_str=True)
    assert printed == expected
    assert printed["model"]["position"]["kind"] == "alibi"


@pytest.mark.slow
def test_multirun_sweeps_two_arms(tmp_path):
    sweep = tmp_path / "sweep"
    args = tiny_overrides()
    result = zoo_train(
        "-m",
        "model/position=rope,alibi",
        *args,
        "trainer.max_steps=3",
        "trainer.val_check_interval=3",
        f"hydra.sweep.dir={sweep}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    kinds = sorted(json.loads((sweep / str(i) / "summary.json").read_text())["position"] for i in (0, 1))
    assert kinds == ["alibi", "rope"]


def _assert_clean_failure(result, *fragments):
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [ln for ln in result.stderr.strip().splitlines() if ln.startswith("zoo-train: error:")]
    assert len(lines) == 1, result.stderr[-3000:]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.mark.slow  # a console-script process each: an interpreter start-up and its imports
@pytest.mark.parametrize(
    "override, fragments",
    [
        ("model.norm=middle", ["model.norm", "pre, post"]),
        ("model.d_modle=3", ["d_modle", "allowed keys"]),
        ("model=lama", ["lama", "gpt"]),
        ("model.n_heads=3", ["divisible", "3"]),
    ],
)
def test_bad_overrides_fail_with_one_line_through_the_console_script(override, fragments, tmp_path):
    exe = shutil.which("zoo-train") or str(Path(sys.executable).parent / "zoo-train")
    result = subprocess.run([exe, override, f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=120)
    _assert_clean_failure(result, *fragments)
    assert result.returncode == 2
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.slow
def test_bad_data_files_fail_with_one_line(tmp_path, zoo_train_here):
    run = tmp_path / "run"
    base = [*tiny_overrides(run), "data.source=local"]
    _assert_clean_failure(zoo_train_here(*base, f"data.path={tmp_path / 'missing.txt'}"), "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    _assert_clean_failure(zoo_train_here(*base, f"data.path={empty}"), "empty")
    assert not run.exists(), "a refused data file left a run directory behind"
    binary = tmp_path / "latin1.txt"
    binary.write_bytes("caf\xe9 au lait\n".encode("latin-1") * 50)
    _assert_clean_failure(zoo_train_here(*base, f"data.path={binary}"), "latin1.txt")
    table = tmp_path / "table.jsonl"
    table.write_text("\n".join(json.dumps({"body": f"line {i}"}) for i in range(50)))
    _assert_clean_failure(zoo_train_here(*base, f"data.path={table}"), "text", "body")


@pytest.mark.slow
def test_bad_checkpoints_and_vocab_fail_with_one_line(tmp_path, zoo_train_here):
    run = tmp_path / "run"
    _assert_clean_failure(zoo_train_here(*tiny_overrides(run), f"ckpt_path={tmp_path / 'nope.ckpt'}"), "nope.ckpt")
    good = tmp_path / "good"
    assert zoo_train_here(*tiny_overrides(good)).returncode == 0
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes((good / "checkpoints" / "last.ckpt").read_bytes()[:2000])
    _assert_clean_failure(zoo_train_here(*tiny_overrides(run), f"ckpt_path={truncated}"), "truncated")
    _assert_clean_failure(zoo_train_here(*tiny_overrides(tmp_path / "v"), "model.vocab_size=100"), "100", "vocab")
    _assert_clean_failure(zoo_train_here(*tiny_overrides(tmp_path / "t"), "task=seq2seq"), "seq2seq", "decoder_only")
    _assert_clean_failure(zoo_train_here(*tiny_overrides(tmp_path / "l"), "data.seq_len=100"), "100", "64")


@pytest.mark.slow
def test_two_process_ddp_on_cpu_shares_one_run_directory(tmp_path):
    """trainer.devices=2 on CPU: two real processes (gloo), one run directory, one report;
    the global batch is split across the ranks, so the tokens seen match one process. The command
    ends in a flag (as `... -cn quick` does), after which Lightning's launcher adds rank 1's
    run directory."""
    run = tmp_path / "run"
    result = zoo_train(
        *tiny_overrides(run),
        "trainer.devices=2",
        "trainer.strategy=ddp",
        "data.global_batch_size=8",
        "trainer.max_steps=4",
        "trainer.val_check_interval=2",
        "-cn",
        "config",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert sum(line.startswith("run directory:") for line in result.stdout.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["global_step"] == 4
    assert summary["tokens_seen"] == 4 * 8 * 32  # steps x global batch x seq_len
    assert (run / "checkpoints" / "last.ckpt").is_file()
