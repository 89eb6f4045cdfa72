"""Soak run (not a test): a long CPU training run whose memory must stay flat after warm-up, whose
metrics file and checkpoints must stay intact, and which must resume cleanly afterwards.

    python benchmarks/soak.py --minutes 30 --out soak.json --plot soak.png

Runs `zoo-train` (the default `gpt` preset on the King James Bible, byte tokenizer so that no
tokenizer training skews the start) for `--minutes` of wall time (Lightning's max_time), with
validation and checkpoints every 100 steps, sampling the resident memory (RSS) of the process
every `--every` seconds. Then it checks every checkpoint loads, metrics.csv parses with strictly
increasing steps, and that `ckpt_path=last` continues the run for 50 more steps. Reports RSS
after warm-up (the median of minutes 2-4) against the last three minutes.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between memory samples")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the run")
    parser.add_argument("--out", default=None)
    parser.add_argument("--plot", default=None)
    parser.add_argument("--run-dir", default=None)
    args = parser.parse_args()

    run = Path(args.run_dir or tempfile.mkdtemp(prefix="zoo-soak-")) / "run"
    seconds = int(args.minutes * 60)
    overrides = [
        "tokenizer=byte",
        "model.vocab_size=320",
        "trainer.max_steps=10000000",
        f"+trainer.max_time=00:{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}",
        "trainer.val_check_interval=100",
        "callbacks.checkpoint_every_n_steps=100",
        "callbacks.save_top_k=3",
        "callbacks.progress_bar=none",
        f"hydra.run.dir={run}",
    ]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    cmd = [sys.executable, "-m", "zoo.cli.train", *overrides]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None  # stderr=PIPE
    samples: list[tuple[float, float]] = []
    while proc.poll() is None:
        mb = rss_mb(proc.pid)
        if mb is not None:
            samples.append((time.monotonic() - start, mb))
        time.sleep(args.every)
    stderr = proc.stderr.read()
    if proc.returncode != 0:
        sys.exit(f"soak run failed (exit {proc.returncode}): {stderr[-2000:]}")

    from zoo.training.checkpoint.files import read_checkpoint

    checkpoints = sorted((run / "checkpoints").glob("*.ckpt"))
    steps = {p.name: read_checkpoint(p)["global_step"] for p in checkpoints}
    with open(run / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    logged = [int(r["step"]) for r in rows if r.get("train/loss")]
    assert logged == sorted(set(logged)), "metrics.csv has repeated or unordered steps"
    summary = json.loads((run / "summary.json").read_text())
    final = summary["global_step"]

    resumed = subprocess.run(
        [
            *cmd[:3],
            *[o for o in overrides if not o.startswith(("trainer.max_steps", "+trainer.max_time"))],
            f"trainer.max_steps={final + 50}",
            "ckpt_path=last",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    if resumed.returncode != 0:
        sys.exit(f"resume failed: {resumed.stderr[-2000:]}")
    after = json.loads((run / "summary.json").read_text())
    assert after["global_step"] == final + 50 and after["resumed_at_step"] == final

    warm = [mb for t, mb in samples if 120 <= t <= 240] or [mb for _, mb in samples[: len(samples) // 4]]
    end_t = samples[-1][0]
    tail = [mb for t, mb in samples if t >= end_t - 180]
    result = {
        "minutes": args.minutes,
        "threads": args.threads,
        "steps": final,
        "tokens_per_s": summary["tokens_per_s"],
        "val_loss": summary["metrics"].get("val/loss"),
        "rss_mb_after_warmup": round(statistics.median(warm), 1),
        "rss_mb_last_3_min": round(statistics.median(tail), 1),
        "rss_mb_max": round(max(mb for _, mb in samples), 1),
        "rss_growth_mb": round(statistics.median(tail) - statistics.median(warm), 1),
        "checkpoints_loaded": steps,
        "metrics_rows": len(rows),
        "resumed_to_step": after["global_step"],
        "samples": [(round(t, 1), round(mb, 1)) for t, mb in samples],
    }
    text = json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 3.2))
        ax.plot([t / 60 for t, _ in samples], [mb for _, mb in samples], lw=1.2)
        ax.set_xlabel("minutes")
        ax.set_ylabel("resident memory (MB)")
        ax.set_title(
            f"zoo-train soak: {final} steps in {args.minutes:g} min, RSS after warm-up "
            f"{result['rss_mb_after_warmup']:.0f} MB, at the end {result['rss_mb_last_3_min']:.0f} MB",
            fontsize=9,
        )
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)


if __name__ == "__main__":
    main()
