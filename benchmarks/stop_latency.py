"""Time from SIGTERM to exit (not a test): how long a scheduler waits for zoo-train to stop.

    python benchmarks/stop_latency.py --trials 5 --load 2 --out stop_latency.json

Each trial starts a small run (d_model 64, 2 layers, byte tokenizer, King James Bible), waits for
its first checkpoint, sends SIGTERM at one of two moments and times the process's exit:

- `training`: during the training steps (the stop comes at the next step boundary);
- `validation`: 2 s into an in-loop validation over the whole validation split (the stop comes
  at the next validation batch, saved as of the validation's start).

`--load N` runs N other trainings on the same machine meanwhile (the cores are shared). Each stop
must leave failed.json and exit 143; the medians are printed and written to `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = [
    "model.d_model=64",
    "model.n_heads=2",
    "model.n_layers=2",
    "model.vocab_size=300",
    "model.max_seq_len=64",
    "tokenizer=byte",
    "data.seq_len=32",
    "data.global_batch_size=8",
    "scheduler.warmup_steps=5",
    "callbacks.progress_bar=none",
]
MOMENTS = {
    "training": [
        "trainer.max_steps=100000",
        "trainer.val_check_interval=100000",
        "data.max_examples=2000",
        "callbacks.checkpoint_every_n_steps=20",
    ],
    "validation": [
        "trainer.max_steps=100000",
        "trainer.val_check_interval=20",
        "trainer.limit_val_batches=1.0",
        "callbacks.checkpoint_every_n_steps=20",
        "callbacks.stop_grace_s=5",
    ],
}


def start(run: Path, extra: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "zoo.cli.train", *BASE, *extra, f"hydra.run.dir={run}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )


def trial(root: Path, moment: str, n: int) -> float:
    run = root / f"{moment}-{n}"
    proc = start(run, MOMENTS[moment])
    try:
        deadline = time.monotonic() + 300
        while not (run / "checkpoints" / "last.ckpt").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{run}: ended or stalled before its first checkpoint")
            time.sleep(0.05)
        time.sleep(2.0 if moment == "validation" else 0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=300)
        elapsed = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 128 + signal.SIGTERM or not (run / "failed.json").is_file():
        raise RuntimeError(f"{run}: exit {proc.returncode}, failed.json {(run / 'failed.json').is_file()}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--load", type=int, default=2, help="other trainings running meanwhile")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        load = [start(root / f"load-{i}", MOMENTS["training"]) for i in range(args.load)]
        try:
            times = {moment: [trial(root, moment, n) for n in range(args.trials)] for moment in MOMENTS}
        finally:
            for proc in load:
                proc.kill()
                proc.wait()
    result = {
        "load": args.load,
        "trials": args.trials,
        "cpus": os.cpu_count(),
        **{f"{m}_median_s": round(statistics.median(t), 2) for m, t in times.items()},
        **{f"{m}_max_s": round(max(t), 2) for m, t in times.items()},
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
