"""Host memory per rank at FSDP setup (not a test): `trainer=fsdp` builds the model on the meta
device and gives each rank storage for its rows only (`zoo.models.init`), so a rank's peak at
setup should be its share of the weights plus a fixed overhead, not the whole model.

    python benchmarks/fsdp_setup_memory.py --out benchmarks/results/fsdp_setup_memory.json

Starts `zoo-train trainer=fsdp_cpu` (2 gloo ranks, float32) on a model of about 1.03 B parameters
and on a tiny one (the fixed overhead: interpreter, torch, Lightning, data), reads each rank's
high-water resident set at the end of setup from the run's log line ("rank R holds N of its M
parameters; host memory peak so far X GiB"), and ends the run there. For comparison it builds the same large
model whole in one process (what every rank held before sharding without the meta device) and
reports that process's high-water mark."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LARGE = ["model=llama", "model.d_model=2048", "model.n_heads=16", "model.n_layers=20", "model.d_ff=5632"]
TINY = ["model=llama", "model.d_model=32", "model.n_heads=4", "model.n_layers=1", "model.d_ff=64"]
RUN = [
    "trainer=fsdp_cpu",
    "tokenizer=byte",
    "trainer.max_steps=1",
    "scheduler.warmup_steps=0",
    "data.seq_len=16",
    "data.global_batch_size=2",
    "trainer.limit_val_batches=1",
]
LINE = re.compile(r"rank (\d+) holds ([\d,]+) of its ([\d,]+) parameters; host memory peak so far ([\d.]+) GiB")


def sharded_setup(model: list[str], work: Path, timeout: float = 1800) -> dict:
    """Start the run, read both ranks' setup lines from its logs, then end it (what follows,
    a training step of the model, is not what is measured)."""
    run_dir = work / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "zoo.cli.train", *model, *RUN, f"hydra.run.dir={run_dir}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None  # stdout=PIPE
    ranks: dict = {}
    start = time.monotonic()
    try:
        while len(ranks) < 2:
            if proc.poll() is not None and len(ranks) < 2:
                raise SystemExit(
                    f"zoo-train ended ({proc.returncode}) before both ranks set up:\n{proc.stdout.read()[-3000:]}"
                )
            if time.monotonic() - start > timeout:
                raise SystemExit("no setup line within the time limit")
            for log in run_dir.glob("train*.log"):
                for rank, held, total, peak in LINE.findall(log.read_text(errors="replace")):
                    ranks[int(rank)] = {
                        "parameters_held": int(held.replace(",", "")),
                        "parameters": int(total.replace(",", "")),
                        "peak_gib": float(peak),
                    }
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return ranks


WHOLE = """
import resource, torch, zoo
model = zoo.build_model(zoo.compose({overrides!r}).model)
n = sum(p.numel() for p in model.parameters())
print(n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)
"""


def whole_build(model: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", WHOLE.format(overrides=model + ["tokenizer=byte"])],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    n, peak = out.stdout.split()[-2:]
    return {"parameters": int(n), "peak_gib": float(peak)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "large").mkdir()
        (Path(tmp) / "tiny").mkdir()
        large = sharded_setup(LARGE, Path(tmp) / "large")
        tiny = sharded_setup(TINY, Path(tmp) / "tiny")
    whole = whole_build(LARGE)
    params = large[0]["parameters"]
    gib = 2**30
    rows = []
    for rank in (0, 1):
        share = large[rank]["parameters_held"] * 4 / gib  # float32
        above = large[rank]["peak_gib"] - tiny[rank]["peak_gib"]
        rows.append(
            {
                "rank": rank,
                "share_of_weights_gib": round(share, 3),
                "peak_gib": large[rank]["peak_gib"],
                "tiny_model_peak_gib": tiny[rank]["peak_gib"],
                "peak_above_tiny_gib": round(above, 3),
                "above_share_gib": round(above - share, 3),
            }
        )
    result = {
        "command": "python benchmarks/fsdp_setup_memory.py",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "model": " ".join(LARGE),
        "run": " ".join(RUN),
        "parameters": params,
        "whole_model_gib": round(params * 4 / gib, 3),
        "ranks": rows,
        "whole_build_one_process_peak_gib": whole["peak_gib"],
    }
    print(f"model: {params:,} parameters ({params * 4 / gib:.2f} GiB in float32), 2 ranks, trainer=fsdp_cpu")
    print("| rank | share of the weights | peak at setup | tiny model's peak | peak above tiny | above the share |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['rank']} | {r['share_of_weights_gib']:.2f} GiB | {r['peak_gib']:.2f} GiB | "
            f"{r['tiny_model_peak_gib']:.2f} GiB | {r['peak_above_tiny_gib']:.2f} GiB | {r['above_share_gib']:.2f} GiB |"
        )
    print(f"the same model built whole in one process: peak {whole['peak_gib']:.2f} GiB")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
