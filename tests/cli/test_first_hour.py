"""A new user's first hour, replayed: the mistakes a first hour makes get one line naming the key
or file and a non-zero exit, writing nothing (each tool's own `main`, in this process, where the
mistake is caught before anything trains); and one walk through the tools end to end in a fresh
directory: train, generate, eval, a short sweep with a failed arm, compare, export, an interrupt
and `ckpt_path=last`."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.conftest import run_main
from tests.forked import Forked, fork_tool
from tests.training.distributed.conftest import wait_for

TOOLS = {
    "zoo-train": "zoo.cli.train",
    "zoo-generate": "zoo.cli.generate",
    "zoo-eval": "zoo.cli.eval",
    "zoo-compare": "zoo.cli.compare",
    "zoo-export": "zoo.cli.export",
}


def in_process(tool: str, args: list[str], capsys, monkeypatch) -> tuple[int, str]:
    """(exit status, stderr) of `tool`'s main() with `args`, run in this process."""
    import importlib

    status, _, err = run_main(importlib.import_module(TOOLS[tool]).main, [tool, *args], capsys, monkeypatch)
    return status, err


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished tiny run (a run directory and its checkpoint)."""
    run = tmp_path_factory.mktemp("first") / "run"
    result = zoo_train(*tiny_overrides(run))
    assert result.returncode == 0, result.stderr[-2000:]
    return run


def cases(run: Path, tmp: Path) -> list[tuple[str, list[str], str]]:
    text = tmp / "notes.txt"
    text.write_text("not a checkpoint\n")
    small = tmp / "small.txt"
    small.write_text("a tiny file\nof two lines\n")
    return [
        ("zoo-train", ["trainer.max_steps=abc"], "trainer.max_steps must be an integer >= -1, got 'abc'"),
        ("zoo-train", ["trainer.val_check_interval=abc"], "trainer.val_check_interval must be a number of steps"),
        ("zoo-train", ["trainer.max_step=4"], "did you mean trainer.max_steps?"),
        ("zoo-train", ["-cn", "numbers_seq"], "recipes (-cn NAME): ablate_activation"),
        ("zoo-train", ["ckpt_path=last"], "ckpt_path=last: no run under runs/ has a checkpoints/last.ckpt"),
        (
            "zoo-generate",
            [f"ckpt={run}", "prompt=the", f"attention_map={tmp}/missing/a.png"],
            f"attention_map={tmp}/missing/a.png: the directory {tmp}/missing does not exist",
        ),
        ("zoo-generate", [f"ckpt={run}", "prompt=the", "num_beams=4"], "num_beams only applies to strategy=beam"),
        (
            "zoo-generate",
            [f"ckpt={run}", "prompt=the", "dtype=float16"],
            "dtype must be float32 or bfloat16, got 'float16'",
        ),
        *(
            [
                (
                    "zoo-generate",
                    [f"ckpt={run}", "prompt=the", "device=cuda"],
                    "device=cuda, but torch sees no CUDA device",
                )
            ]
            if not torch.cuda.is_available()
            else []
        ),
        ("zoo-eval", [f"ckpt={text}"], f"{text} is not a checkpoint (not a file written by torch.save)"),
        ("zoo-eval", [f"ckpt={tmp}"], f"{tmp} is a directory without a checkpoint"),
        ("zoo-eval", [f"ckpt={run}", f"data={small}"], f"data={small} has"),
        ("zoo-compare", [str(run), "metric=val/los"], "metric=val/los: no run logged it; did you mean val/loss?"),
        ("zoo-compare", [str(run), "lengths=two"], "lengths=two: give comma-separated integers"),
    ]


@pytest.mark.slow
def test_first_hour_mistakes_are_one_line_and_write_nothing(finished, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = sorted(p.relative_to(finished) for p in finished.rglob("*"))
    for tool, args, expected in cases(finished, tmp_path):
        status, err = in_process(tool, args, capsys, monkeypatch)
        assert status == 2, (tool, args, err[-2000:])
        assert "Traceback" not in err
        lines = [line for line in err.splitlines() if line.startswith(f"{tool}: error:")]
        assert len(lines) == 1 and expected in lines[0], (tool, args, lines)
    assert not (tmp_path / "runs").exists()  # no refused command left a run directory
    assert sorted(p.relative_to(finished) for p in finished.rglob("*")) == before


@pytest.mark.slow
def test_generate_casts_the_weights_once_with_dtype_bfloat16(finished, capsys, monkeypatch):
    """dtype=bfloat16: the model's weights become bf16 before decoding (no autocast cast of each
    weight at every step); the continuation is printed as with float32."""
    import zoo.models.generate as gen  # zoo-generate imports generate from here when it runs

    seen = []
    original = gen.generate
    monkeypatch.setattr(
        gen, "generate", lambda model, *a, **k: seen.append(next(model.parameters()).dtype) or original(model, *a, **k)
    )
    status, err = in_process(
        "zoo-generate",
        [f"ckpt={finished}", "prompt=the", "max_new_tokens=4", "dtype=bfloat16", "device=cpu"],
        capsys,
        monkeypatch,
    )
    assert status == 0, err[-2000:]
    assert seen == [torch.bfloat16]


def test_a_gpu_recipe_on_a_machine_without_one_says_what_to_add(tmp_path, capsys, monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU: the recipe would run")
    monkeypatch.chdir(tmp_path)
    status, err = in_process("zoo-train", ["-cn", "gpt2_small"], capsys, monkeypatch)
    assert status == 2
    assert "asks for a GPU and this machine has none" in err and "add trainer=cpu" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "words, warmup, fix",
    [
        (["trainer.max_steps=1"], 1, "trainer.max_steps=2"),
        (["scheduler.total_steps=1"], 10, "scheduler.total_steps=11"),
    ],
)
def test_a_quick_run_too_short_for_its_warmup_says_what_to_change(words, warmup, fix, tmp_path, cli_here, monkeypatch):
    """`-cn quick trainer.max_steps=1`: the recipe's warmup (a tenth of the run, at least one step)
    fills the one step; the line names the keys that make room for it."""
    monkeypatch.chdir(tmp_path)
    result = cli_here("train", "-cn", "quick", *words)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip() == (
        "zoo-train: error: scheduler=cosine needs total steps (scheduler.total_steps or trainer.max_steps) "
        f"greater than scheduler.warmup_steps ({warmup}), got 1: give {fix} or more, or "
        "scheduler.warmup_steps=0, or scheduler=constant"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_liger_loss_without_a_cuda_gpu_is_one_line(tmp_path, capsys, monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU: the option would run")
    monkeypatch.chdir(tmp_path)
    status, err = in_process("zoo-train", ["task.output_loss=liger"], capsys, monkeypatch)
    assert status == 2
    lines = [line for line in err.splitlines() if line.startswith("zoo-train: error:")]
    assert len(lines) == 1 and "task.output_loss=liger runs Triton kernels on a CUDA GPU" in lines[0], err[-2000:]
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_tensorboard_missing_is_one_line_before_training(tmp_path):
    """As on a machine without tensorboard: the modules are made unimportable for this process."""
    code = (
        "import sys; sys.modules['tensorboard'] = None; sys.modules['tensorboardX'] = None; "
        "from zoo.cli.train import main; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, *tiny_overrides(tmp_path / "run"), "logger.tensorboard=true"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "logger.tensorboard=true needs tensorboard: pip install tensorboard" in result.stderr
    assert not (tmp_path / "run").exists()


def val_rows(run: Path) -> list[dict]:
    with open(run / "metrics.csv", newline="") as fh:
        return [r for r in csv.DictReader(fh) if r.get("val/loss")]


@pytest.mark.slow
def test_the_walk_through(tmp_path):
    """train (shorter than its validation interval) -> generate -> eval -> a sweep with a failed
    arm -> compare -> export -> Ctrl-C -> ckpt_path=last, in one fresh working directory; each
    tool a process of its own, forked from this one (tests/forked.py)."""
    env = {k: v for k, v in os.environ.items() if k != "ZOO_RUN_TIME"}

    def tool(name, *args, check=True):
        result = fork_tool(name.removeprefix("zoo-"), *args, cwd=tmp_path, env=env)
        if check:
            assert result.returncode == 0, (name, args, result.stderr[-3000:])
        return result

    base = [o for o in tiny_overrides() if not o.startswith(("trainer.val_check_interval", "trainer.max_steps"))]
    base += ["tokenizer=sentencepiece_bpe", "tokenizer.vocab_size=200", "scheduler.total_steps=40"]
    base = [o for o in base if o != "tokenizer=byte"]
    # a run shorter than its validation interval validates at its end
    first = tool("zoo-train", *base, "trainer.max_steps=5", "trainer.val_check_interval=100")
    (run,) = [p for p in (tmp_path / "runs").glob("*/*") if p.is_dir()]
    summary = json.loads((run / "summary.json").read_text())
    assert "val/loss" in summary["metrics"] and [r["step"] for r in val_rows(run)] == ["4"]
    assert "val/loss" in first.stdout
    # generate keeps the space after the prompt
    generated = tool(
        "zoo-generate", f"ckpt={run}", "prompt=And God said", "max_new_tokens=8", "attention_map=attention.png"
    )
    assert "attention map of the first prompt written to attention.png" in generated.stderr
    assert (tmp_path / "attention.png").stat().st_size > 0
    out = generated.stdout.strip()
    assert out.startswith("And God said") and out == " ".join(out.split(" ")) and len(out) > len("And God said")
    tok = __import__("zoo.data.tokenizers", fromlist=["load_tokenizer"]).load_tokenizer(run / "tokenizer")
    ids = tok.encode(out)
    assert tok.decode(ids) == out  # the printed text is what the model's ids read as
    # eval on its own validation split: the batches the run validated on give its val/loss
    metrics = json.loads(tool("zoo-eval", f"ckpt={run}", "batch_size=4", "limit_batches=2").stdout)
    assert abs(metrics["metrics"]["loss"] - summary["metrics"]["val/loss"]) < 1e-4
    # a sweep with a failed arm ends with one summary line and status 1
    sweep = tool(
        "zoo-train",
        "-m",
        *base,
        "trainer.max_steps=4",
        "trainer.val_check_interval=2",
        "optim.lr=1e4,1e-3",
        "trainer.gradient_clip_val=null",
        check=False,
    )
    assert sweep.returncode == 1 and "Traceback" not in sweep.stderr and "Error executing job" not in sweep.stderr
    summary_lines = [ln for ln in sweep.stderr.splitlines() if "arm(s) of the sweep" in ln]
    assert len(summary_lines) == 1 and "1 of 2 arm(s)" in summary_lines[0] and "failed.json" in summary_lines[0]
    (sweep_dir,) = (tmp_path / "multirun").glob("*/*")
    (failed,) = sweep_dir.glob("*/failed.json")
    error = json.loads(failed.read_text())["error"]
    assert (
        "training stopped, no checkpoint had been written yet" in error
        or "training stopped, the last good checkpoint is " in error
    )
    assert "is no checkpoint" not in error
    report = tool("zoo-compare", str(sweep_dir))
    assert json.loads(report.stdout)["arms"] == 2
    assert "failed" in (sweep_dir / "compare" / "report.md").read_text()
    # export: transformers' generate stops at zoo's eos
    tool("zoo-export", f"ckpt={run}", "format=hf", "out=exported")
    config = json.loads((tmp_path / "exported" / "config.json").read_text())
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (2, 3, 0)
    # Ctrl-C, then ckpt_path=last finds the interrupted run (not the finished one) and ends it
    long = [*base, "trainer.max_steps=40", "trainer.val_check_interval=20", "callbacks.checkpoint_every_n_steps=2"]
    proc = Forked("train", *long, cwd=tmp_path, env=env)
    runs_before = set((tmp_path / "runs").glob("*/*"))
    try:
        wait_for(
            lambda: any(
                (p / "checkpoints" / "last.ckpt").exists() for p in set((tmp_path / "runs").glob("*/*")) - runs_before
            ),
            180,
            "the interrupted run's first checkpoint",
            proc,
        )
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    (stopped,) = set((tmp_path / "runs").glob("*/*")) - runs_before
    assert "resume with:" in err and (stopped / "failed.json").is_file()
    resumed = tool("zoo-train", *long, "ckpt_path=last")
    assert f"ckpt_path=last resumes {stopped.relative_to(tmp_path)}" in resumed.stderr
    final = json.loads((stopped / "summary.json").read_text())
    assert final["global_step"] == 40 and final["resumed_from"] and not (stopped / "failed.json").exists()
    assert set((tmp_path / "runs").glob("*/*")) == runs_before | {stopped}  # no new directory
