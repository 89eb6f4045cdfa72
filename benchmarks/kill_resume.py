"""Kill-and-resume trials (not a test): SIGKILL a training run at a random moment, start the same
command again, and compare its final weights with those of a run that was never interrupted.

    python benchmarks/kill_resume.py --trials 10 --out kill_resume.json

A small decoder (d_model 64, 2 layers, dropout 0.1, byte tokenizer on the King James Bible),
300 steps, last.ckpt every 10 steps. Each trial kills at a uniformly random time within the
run's training time (some kills land in the middle of a checkpoint write), restarts, and checks
bit-identical weights (torch.equal on every tensor).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

OVERRIDES = [
    "model.d_model=64",
    "model.n_heads=2",
    "model.n_layers=2",
    "model.vocab_size=300",
    "model.max_seq_len=64",
    "model.dropout=0.1",
    "tokenizer=byte",
    "data.seq_len=32",
    "data.global_batch_size=8",
    "data.max_examples=2000",
    "trainer.max_steps=300",
    "trainer.val_check_interval=50",
    "trainer.limit_val_batches=4",
    "scheduler.warmup_steps=20",
    "callbacks.checkpoint_every_n_steps=10",
    "callbacks.progress_bar=none",
]


def train(run: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "zoo.cli.train", *OVERRIDES, f"hydra.run.dir={run}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )


def weights(run: Path) -> dict:
    from zoo.training.checkpoint.files import read_checkpoint

    return read_checkpoint(run / "checkpoints" / "last.ckpt")["state_dict"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="zoo-kill-"))

    start = time.monotonic()
    reference = train(root / "reference")
    reference.wait()
    duration = time.monotonic() - start
    expected = weights(root / "reference")

    trials: list[dict[str, Any]] = []
    for i in range(args.trials):
        run = root / f"trial{i}"
        proc = train(run)
        delay = rng.uniform(0.35, 0.8) * duration  # past start-up, before the end
        time.sleep(delay)
        if proc.poll() is not None:
            trials.append({"trial": i, "killed": False})
            continue
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        from zoo.training.checkpoint.files import CheckpointError, read_checkpoint

        last = run / "checkpoints" / "last.ckpt"
        try:
            at_kill = read_checkpoint(last)["global_step"] if last.exists() else None
        except CheckpointError:
            at_kill = "corrupt"
        stale = [p.name for p in (run / "checkpoints").glob(".*")] if (run / "checkpoints").exists() else []
        again = train(run)
        again.wait()
        got = weights(run)
        identical = again.returncode == 0 and all(torch.equal(expected[k], got[k]) for k in expected)
        trials.append(
            {
                "trial": i,
                "killed": True,
                "after_s": round(delay, 1),
                "checkpoint_step_at_kill": at_kill,
                "partial_write_left": stale,
                "identical": identical,
            }
        )
        print(json.dumps(trials[-1]), flush=True)

    killed = [t for t in trials if t["killed"]]
    result = {
        "trials": len(trials),
        "killed": len(killed),
        "identical": sum(t["identical"] for t in killed),
        "killed_during_a_save": sum(bool(t["partial_write_left"]) for t in killed),
        "reference_seconds": round(duration, 1),
        "details": trials,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "details"}, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
