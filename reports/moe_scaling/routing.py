"""The load telemetry of the mixture arms of the moe_scaling study, from the report's runs.csv
(zoo-compare's per-run table; each value the last one the run logged, at its step 300, on that
step's 1,024 tokens): per arm, size and peak rate, the busiest expert's load as E x its share of
the layer's routed tokens (1 = balanced, 8 = every token on one expert), the idlest expert's, the
number of experts that took under 2% of a layer's tokens (a balanced one takes 12.5%), the mean
router entropy per token and the balance loss E·Σ f_i·P_i (1 when balanced; logged unweighted, so the arm trained
without it shows what it would have been). Means over the 2 layers and 3 seeds; each seed's
value is in routing_runs.csv.

    python reports/moe_scaling/routing.py      # -> routing.md, routing_runs.csv beside this file

`zoo-compare recompute=` makes both again from the rebuilt runs.csv (`generate`) and compares
them line by line with these."""

from __future__ import annotations

import csv
import io
import math
import re
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
E = 8
IDLE = 0.02  # a share of a layer's tokens under this: an expert the router has (nearly) stopped using
LOAD = re.compile(r"^train/moe_load/layer_(\d+)/expert_(\d+)$")
GENERATES = ("routing.md", "routing_runs.csv")  # what recompute= makes again (`generate`)


def number(text: str) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def arm_name(row: dict) -> str | None:
    if row["model.ffn"] != "moe":
        return None
    balance = number(row.get("task.moe_balance"))  # no column where every run kept the default, 0.01
    return "switch_no_balance" if balance == 0.0 else "switch"


def per_run(row: dict) -> dict:
    """One run's routing: the per-layer loads and the summaries above."""
    layers: dict[int, dict[int, float]] = {}
    for key, value in row.items():
        match = LOAD.match(key)
        if match and number(value) is not None:
            layers.setdefault(int(match.group(1)), {})[int(match.group(2))] = float(value)
    loads = [[layer[e] for e in range(E)] for _, layer in sorted(layers.items())]
    return {
        "arm": arm_name(row),
        "d_model": int(float(row["model.d_model"])),
        "lr": float(row["optim.lr"]),
        "seed": int(float(row["seed"])),
        "run": f"{row['sweep']}/{row['run']}",
        "val_loss": number(row["val/loss"]),
        "load_max": statistics.fmean(E * max(layer) for layer in loads),
        "load_min": statistics.fmean(E * min(layer) for layer in loads),
        "idle_experts": statistics.fmean(sum(v < IDLE for v in layer) for layer in loads),
        "entropy": number(row["train/moe_entropy"]),
        "balance_loss": number(row["train/moe_balance_loss"]),
    }


def main() -> None:
    for name, text in generate(HERE).items():
        with (HERE / name).open("w", newline="") as handle:
            handle.write(text)


def generate(directory: Path) -> dict[str, str]:
    """routing.md and routing_runs.csv, from the runs.csv in `directory`."""
    with (directory / "runs.csv").open(newline="") as handle:
        rows = [per_run(r) for r in csv.DictReader(handle) if r["status"] == "finished" and arm_name(r)]
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault((r["arm"], r["d_model"], r["lr"]), []).append(r)
    measures = ("load_max", "load_min", "idle_experts", "entropy", "balance_loss")
    lines = [
        "# Routing at the end of training, by arm, size and peak rate",
        "",
        f"From runs.csv ({len(rows)} mixture runs; `routing.py`). Each cell: the mean over 2 layers and "
        "the seeds (min–max over seeds in brackets). Load = E × the share of a layer's routed tokens "
        f"(1 = balanced, {E} = all on one expert); idle = experts with under {IDLE:.0%} of a layer's tokens "
        f"(of {E}); entropy: the mean over tokens of the entropy of a token's router probabilities (ln {E} = "
        f"{math.log(E):.3f} when the router is uniform, undecided; lower: more confident); "
        "balance loss E·Σ f_i·P_i, unweighted (1 when balanced).",
        "",
        "| arm | d_model | lr | seeds | busiest load | idlest load | idle experts | entropy | balance loss |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (arm, d, lr), group in sorted(cells.items(), key=lambda kv: (kv[0][0] != "switch", kv[0][1], kv[0][2])):
        parts = []
        for m in measures:
            values = [g[m] for g in group if g[m] is not None]
            parts.append(f"{statistics.fmean(values):.2f} [{min(values):.2f}–{max(values):.2f}]" if values else "–")
        lines.append(f"| {arm} | {d} | {lr:g} | {len(group)} | " + " | ".join(parts) + " |")
    summary = []
    for arm in ("switch", "switch_no_balance"):
        group = [r for r in rows if r["arm"] == arm]
        if not group:
            continue
        summary.append(
            f"- **{arm}** ({len(group)} runs): busiest load {statistics.fmean(r['load_max'] for r in group):.2f}, "
            f"idle experts per layer {statistics.fmean(r['idle_experts'] for r in group):.2f}, "
            f"balance loss {statistics.fmean(r['balance_loss'] for r in group):.3f} (means over every run)."
        )
    markdown = "\n".join(lines + ["", "Over all sizes and rates:", "", *summary]) + "\n"
    return {"routing.md": markdown, "routing_runs.csv": table.getvalue()}


if __name__ == "__main__":
    main()
