"""What each change of the speedrun ring costs, at each of the study's two widths: counted from
the report's runs.csv (N, the non-embedding parameters, the forward FLOPs per token at the
trained context of 64 and the forward FLOPs per training token, which add the MTP module that
only training runs, all as zoo counts them from the rows, the same in every run of an arm and
width) and measured by benchmarks/options_cost.py on the study's shapes (training
tokens/s, the arms interleaved round by round on one otherwise idle machine, medians; the
activations saved for the backward pass and the parameters' bytes, counted on one step):

    python reports/speedrun_ring/cost.py      # -> cost.md beside this file

The two measurements (`MEASURED` below) are inputs no table rebuilds; `zoo-compare recompute=`
makes cost.md again from the rebuilt runs.csv and them, and compares it line by line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
WIDTHS = (64, 128)
SHAPE = (
    "--batch 16 --seq-len 64 --threads 1 --rounds 15 --steps 2 --model model=llama --model model.n_layers=4 "
    "--model model.n_heads=4 --model model.n_kv_heads=4 --model model.vocab_size=300 --model model.max_seq_len=64"
)
GENERATES = ("cost.md",)
# the sweep's arm keys (runs.csv's columns): the change each names, and its options_cost.py arm
CHANGES = {
    "model.value_embeds": ("value embeddings", "model.value_embeds=2"),
    "model.value_residual": ("value residual", "model.value_residual=learned"),
    "model.attn_gate": ("gated attention", "model.attn_gate=elementwise"),
    "model.activation": ("ReLU²", "model.activation=relu2"),
    "task.mtp_depth": ("MTP (depth 1)", "task.mtp_depth=1"),
    "model.attn_sink": ("attention sinks", "model.attn_sink=learned"),
}
BENCH = {"baseline": "baseline", **dict(CHANGES.values()), "all six": "speedrun all"}
ARMS = ",".join(BENCH.values())
MEASURED = {
    f"cost_{w}.json": f'python benchmarks/options_cost.py --arms "{ARMS}" {SHAPE} --model model.d_model={w} '
    f"--out reports/speedrun_ring/cost_{w}.json"
    for w in WIDTHS
}


def _arm(row: dict, baseline: dict) -> str:
    changed = [name for key, (name, _) in CHANGES.items() if row.get(key, "") != baseline.get(key, "")]
    return "baseline" if not changed else changed[0] if len(changed) == 1 else "all six"


def counted(directory: Path) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(arm, width) -> (N, forward FLOPs per token, forward FLOPs per training token), from runs.csv."""
    with (directory / "runs.csv").open(newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["status"] == "finished"]
    base = next(r for r in rows if all(r.get(k, "") in ("", "none", "0", "swiglu", "(unset)") for k in CHANGES))
    out: dict[tuple[str, int], tuple[int, int, int]] = {}
    for r in rows:
        key = (_arm(r, base), int(r["model.d_model"]))
        train = r.get("train_flops_per_token") or r["flops_per_token"]  # the column is there when any run has MTP
        value = (int(float(r["N"])), int(float(r["flops_per_token"])), int(float(train)))
        if out.setdefault(key, value) != value:
            raise ValueError(f"{key}: runs of one arm and width count differently: {out[key]} and {value}")
    return out


def generate(directory: Path) -> dict[str, str]:
    """cost.md from runs.csv and the two measurements in `directory`."""
    counts = counted(directory)
    lines = [
        "# What each change costs, at each width",
        "",
        "N: non-embedding parameters; FLOPs: forward FLOPs per token at the trained context (64); "
        "training FLOPs: the same with the MTP module, which only training runs (C counts these); all "
        "counted by zoo from the rows (runs.csv). Measured (`cost_W.json`, benchmarks/options_cost.py "
        "on the study's shapes, 16 × 64 tokens a step, one thread, the arms interleaved round by round, "
        "medians of 15 rounds of 2 steps): training tokens/s and its spread over the rounds, the "
        "activations saved for the backward pass and the parameters' bytes against the baseline's.",
        "",
        "| change | d_model | N | FLOPs/token | training FLOPs/token | training FLOPs vs baseline | tokens/s | tokens/s vs baseline | spread "
        "| saved for backward vs baseline | parameters vs baseline |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for width in WIDTHS:
        measured = json.loads((directory / f"cost_{width}.json").read_text())
        by_arm = {row["arm"]: row for row in measured["rows"]}
        base_flops = counts[("baseline", width)][2]
        for name, arm in BENCH.items():
            n, flops, train = counts[(name, width)]
            m = by_arm[arm]
            lines.append(
                f"| {name} | {width} | {n:,} | {flops:,} | {train:,} | {train / base_flops:.2f} × | {m['tokens_per_s']:,.0f} | "
                f"{m['ratio']:.2f} × | {100 * m['spread']:.0f}% | {m['saved_ratio']:.2f} × | {m['param_ratio']:.2f} × |"
            )
    load = [json.loads((directory / f"cost_{w}.json").read_text())["machine"] for w in WIDTHS]
    lines += [
        "",
        "Measured on "
        + "; ".join(
            f"d_model {w}: {m['device']}, torch {m['torch']}, {m['threads']} thread, 1-minute load "
            f"{m['load_average_1min']['before']:.2f} before and {m['load_average_1min']['after']:.2f} after"
            for w, m in zip(WIDTHS, load)
        )
        + ".",
    ]
    return {"cost.md": "\n".join(lines) + "\n"}


def main() -> None:
    for name, text in generate(HERE).items():
        (HERE / name).write_text(text)


if __name__ == "__main__":
    main()
