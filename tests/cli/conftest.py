"""Helpers to run `zoo-train` as a user would: a real subprocess, real files."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from tests.forked import fork_tool


def tiny_overrides(run_dir=None, *, enc_dec: bool = False) -> list[str]:
    """A model and data small enough for a few steps in seconds; in `run_dir`, or with no
    run directory given (Hydra's default `runs/DATE/TIME` under the working directory)."""
    out = [
        "model.d_model=32",
        "model.n_heads=2",
        "model.n_layers=1",
        "model.vocab_size=300",
        "model.max_seq_len=64",
        "tokenizer=byte",
        "data.seq_len=32",
        "data.global_batch_size=4",
        "data.max_examples=300",
        "trainer.max_steps=6",
        "trainer.val_check_interval=3",
        "trainer.limit_val_batches=2",
        "trainer.log_every_n_steps=1",
        "callbacks.checkpoint_every_n_steps=3",
        "callbacks.progress_bar=none",
        "scheduler.warmup_steps=2",
    ]
    if run_dir is not None:
        out.append(f"hydra.run.dir={run_dir}")
    if enc_dec:
        out.append("model.n_decoder_layers=1")
    return out


def zoo_train(
    *args: str, timeout: int = 300, env: dict | None = None, fresh: bool = False
) -> subprocess.CompletedProcess:
    """`zoo-train ARGS...` as a process of its own, waited for. Forked from the test's process
    (tests/forked.py: its own pid, exit status and files, the ranks it launches new interpreters)
    without another start and import of torch and Lightning; a new interpreter when `fresh`, or
    when `env` is given (what a process's environment sets is read as modules are imported), or
    when this process holds a CUDA context (which a forked child cannot use)."""
    if env is None and not fresh and not torch.cuda.is_initialized():
        return fork_tool("train", *args, timeout=timeout)
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "zoo.cli.train", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


@pytest.fixture
def zoo_train_here(cli_here):
    """`zoo_train` as zoo-train's main() in this process (`cli_here`), for refusals and short
    runs that need no process of their own (signals, ranks and sweeps keep `zoo_train`)."""
    return lambda *args: cli_here("train", *args)


def stderr_lines(result) -> str:
    # datasets' own progress bar ("Generating train split: ...") is not a line of zoo's
    return "\n".join(
        line
        for line in result.stderr.replace("\r", "\n").strip().splitlines()
        if line.strip() and not line.startswith("Generating ")
    )


def missed(result, tool: str, *fragments: str, status: int = 2) -> list[str]:
    """What the outcome lacks of a refusal on one line (the status, no traceback, one line of
    zoo-TOOL, each fragment): empty when it is one."""
    err = stderr_lines(result)
    wrong = []
    if result.returncode != status:
        wrong.append(f"exit {result.returncode}, not {status}: {result.stderr[-3000:]}")
    if "Traceback" in result.stderr or len(err.splitlines()) != 1:
        wrong.append(f"not one line: {err[-3000:]}")
    if not err.startswith(f"zoo-{tool}: error: "):
        wrong.append(f"not zoo-{tool}'s error: {err[-3000:]}")
    wrong += [f"{fragment!r} not in {err!r}" for fragment in fragments if fragment not in err]
    return wrong
