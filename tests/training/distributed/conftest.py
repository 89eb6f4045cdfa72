"""Helpers for multi-process runs: real processes, real files, a free port each time."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import torch

from tests.cli.conftest import tiny_overrides, zoo_train
from zoo.training.checkpoint.files import read_checkpoint


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_state(ckpt: Path) -> dict[str, torch.Tensor]:
    return {k: v for k, v in read_checkpoint(ckpt)["state_dict"].items() if k.startswith("model.")}


# a small mixture of experts (a dense first layer, a mixture second) the sharded runs train
MOE = [
    "model.ffn=moe",
    "model.moe_experts=4",
    "model.moe_top_k=2",
    "model.bias=false",
    "model.n_layers=2",
    "model.moe_every=2",
]

# a 4-step tiny run with its checkpoint at the end: what each sharded-equality test trains
SHARDED_RUN = [
    "data.max_examples=20",
    "data.global_batch_size=8",
    "trainer.max_steps=4",
    "scheduler.total_steps=4",
    "trainer.val_check_interval=4",
    "callbacks.checkpoint_every_n_steps=4",
]


def weights_on_each_trainer(tmp_path: Path, *overrides: str) -> dict[str, dict[str, torch.Tensor]]:
    """{trainer: the model's weights after SHARDED_RUN} for one process, DDP and FSDP2 over two
    gloo processes, each with `overrides` and the same global batch."""
    weights = {}
    for trainer in ("cpu", "ddp_cpu", "fsdp_cpu"):
        run = tmp_path / trainer
        done = zoo_train(*tiny_overrides(run), *overrides, *SHARDED_RUN, f"trainer={trainer}")
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads((run / "summary.json").read_text())["global_step"] == 4
        ckpt = run / "checkpoints" / ("full.ckpt" if trainer == "fsdp_cpu" else "last.ckpt")
        weights[trainer] = model_state(ckpt)
    return weights


def max_abs_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)


def wait_for(predicate, timeout: float, what: str, proc=None) -> None:
    """Poll `predicate` every 50 ms; fail with `what` after `timeout` s (or when `proc` ends)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended (exit {proc.returncode}) before {what}")
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def children(pid: int) -> list[int]:
    """Direct child processes of `pid` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def sigkill_when(proc, predicate, timeout: float, what: str) -> None:
    """SIGKILL `proc` as soon as `predicate()` holds; fail if it ends or times out first."""
    try:
        wait_for(predicate, timeout, what, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL


def ok(result) -> None:
    """A zoo-train process that ended well, or its stderr's tail."""
    assert result.returncode == 0, result.stderr[-3000:]


def summary(run: Path) -> dict:
    """A finished run's summary.json."""
    return json.loads((run / "summary.json").read_text())
