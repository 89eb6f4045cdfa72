"""zoo-plan against measured peak memory: small configs (families, activations, position schemes,
precisions, activation checkpointing, batch and sequence lengths) trained for three steps on the
CPU in fresh processes (`zoo.plan.measure`), each planned by `zoo.plan.planner.plan` with the
CPU's kernels. Writes benchmarks/results/plan_check.json and prints a Markdown table.

    python benchmarks/plan_check.py              # about twenty minutes on two cores (bf16 is slow on a CPU)

The target: every plan within 15% of the resident set measured with a fixed mmap threshold (the
live tensors); the resident set under glibc's default malloc is recorded beside it."""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

from zoo.config.schema.model import ModelConfig
from zoo.plan.measure import peak_training_memory
from zoo.plan.options import Device, PlanOptions
from zoo.plan.planner import plan
from zoo.plan.trace import BUFFERS, WEIGHTS

OUT = Path(__file__).parent / "results" / "plan_check.json"
SMALL = dict(d_model=256, n_heads=4, n_layers=4, vocab_size=8192, max_seq_len=1024)
LLAMA = dict(
    SMALL, norm_type="rmsnorm", activation="swiglu", position={"kind": "rope"}, bias=False, tie_embeddings=False
)
CONFIGS: list[tuple[str, dict[str, Any], str, int, int]] = [
    ("gpt", dict(SMALL), "32-true", 8, 512),
    ("llama", dict(LLAMA), "bf16-mixed", 4, 256),
    ("gpt checkpointed", dict(SMALL, checkpoint_activations=True), "32-true", 8, 512),
    ("llama checkpointed", dict(LLAMA, checkpoint_activations=True), "bf16-mixed", 2, 512),
    ("bert (masked LM)", dict(SMALL, family="encoder_only", activation="gelu"), "32-true", 16, 256),
    (
        "t5 (relative, geglu)",
        dict(
            SMALL,
            family="encoder_decoder",
            position={"kind": "relative"},
            norm_type="rmsnorm",
            activation="geglu",
            n_layers=2,
        ),
        "bf16-true",
        4,
        256,
    ),
    ("alibi, dropout 0.1", dict(SMALL, position={"kind": "alibi"}, dropout=0.1), "32-true", 4, 1024),
    ("gpt bf16-true", dict(SMALL), "bf16-true", 8, 256),
]
TOLERANCE = 0.15


def main() -> None:
    rows = []
    for name, model, precision, batch, seq_len in CONFIGS:
        cfg = ModelConfig(**model)
        opts = PlanOptions(batch=batch, seq_len=seq_len, precision=precision, device=Device.cpu, memory="16GiB")
        started = time.perf_counter()
        planned = plan(cfg, opts)
        plan_s = time.perf_counter() - started
        spec = {"model": cfg.to_dict(), "batch": batch, "seq_len": seq_len, "precision": precision, "threads": 2}
        live = peak_training_memory(spec, fixed_mmap_threshold=True)
        default = peak_training_memory(spec, fixed_mmap_threshold=False)
        training = planned.total - planned.parts[WEIGHTS] - planned.parts[BUFFERS]
        row = {
            "name": name,
            "model": model,
            "precision": precision,
            "batch": batch,
            "seq_len": seq_len,
            "planned_total_bytes": planned.total,
            "planned_training_bytes": training,
            "planned_parts": planned.parts,
            "peak_phase": planned.step.peak_phase,
            "plan_seconds": round(plan_s, 2),
            "measured_total_bytes": live["total_bytes"],
            "measured_training_bytes": live["training_bytes"],
            "measured_default_malloc_total_bytes": default["total_bytes"],
            "ratio_total": planned.total / live["total_bytes"],
            "ratio_training": training / live["training_bytes"],
            "ratio_default_malloc_total": planned.total / default["total_bytes"],
        }
        rows.append(row)
        print(
            f"{name}: planned {planned.total / 2**20:.1f} MiB, measured {live['total_bytes'] / 2**20:.1f} MiB "
            f"(default malloc {default['total_bytes'] / 2**20:.1f}), ratio {row['ratio_total']:.3f}",
            file=sys.stderr,
            flush=True,
        )
    record = {
        "command": "python benchmarks/plan_check.py",
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, 2 torch threads",
        "python": platform.python_version(),
        "torch": __import__("torch").__version__,
        "tolerance": TOLERANCE,
        "configs": rows,
        "within_tolerance": all(
            abs(r["ratio_total"] - 1) <= TOLERANCE and abs(r["ratio_training"] - 1) <= TOLERANCE for r in rows
        ),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, indent=2) + "\n")
    from doc_tables import plan_check_table  # the table of docs/memory-planner.md

    print(plan_check_table(rows), end="")


if __name__ == "__main__":
    main()
