"""The associative-recall probe of the hybrid study's first run, every arm at one shared rate of
3e-3 (kept as history; ../recall.py reads the rerun, each arm at its own rate): each run of
`repro_hybrid_recall` scored by
`zoo-eval probe=recall pairs=2,4,8,12 examples=300` (sequences drawn with seed 1, none of them
trained on), per arm and pair count: the accuracy at the queries, the mean over seeds with its
95% Student-t interval (n - 1 degrees of freedom), and each Gated DeltaNet arm's difference to
full attention, paired over seeds, one family of 4 comparisons per pair count (Holm's step-down
on the p-values, each interval at the Bonferroni level 1 - 0.05/4); then, at the trained pair
count, the accuracy by the distance from a key to its query. Chance, guessing among the values:
2/V = 0.03125.

    python reports/hybrid/recall/shared_rate/recall.py collect SWEEP    # -> recall_runs.csv (from each run's probe)
    python reports/hybrid/recall/shared_rate/recall.py                    # -> recall.md

Both read and write beside this file. `zoo-compare recompute=` makes recall.md again from
recall_runs.csv and compares it line by line."""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
import sys
from pathlib import Path

from zoo.compare.stats import difference, holm, t_quantile

HERE = Path(__file__).resolve().parent
GENERATES = ("recall.md",)
MEASURED = {
    "recall_runs.csv": "collected from each run's harness/recall-*.json (zoo-eval probe=recall): "
    "python reports/hybrid/recall/shared_rate/recall.py collect SWEEP"
}
# recipes/arm/hybrid/<file> -> the arm's name as zoo-compare writes it
ARMS = {
    "full": "full",
    "gdn_1_1": "gated_deltanet 1:1 full",
    "gdn_3_1": "gated_deltanet 3:1 full",
    "gdn_7_1": "gated_deltanet 7:1 full",
    "gdn_all": "gated_deltanet",
}
BASELINE = "full"
TRAINED_PAIRS = 8
COLUMNS = ("sweep", "run", "arm", "seed", "pairs", "distance", "queries", "correct", "accuracy")


def _overrides(run: Path) -> dict[str, str]:
    lines = (run / ".hydra" / "overrides.yaml").read_text().splitlines()
    pairs = [line.removeprefix("- ").split("=", 1) for line in lines if "=" in line]
    return {key: value for key, value in pairs}


def collect(sweeps: list[str]) -> None:
    """recall_runs.csv: every run's latest probe, one row per pair count and distance bin."""
    rows = []
    for sweep in map(Path, sweeps):
        for run in sorted((p for p in sweep.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
            probes = sorted((run / "harness").glob("recall-*.json"))
            if not probes:
                sys.exit(f"recall.py: {run} has no probe (zoo-eval ckpt={run} probe=recall ...)")
            given = _overrides(run)
            result = json.loads(probes[-1].read_text())
            for row in result["rows"]:
                rows.append(
                    [sweep.name, run.name, ARMS[given["arm/hybrid"]], given["seed"], row["pairs"], row["distance"]]
                    + [row["queries"], row["correct"], f"{row['correct'] / row['queries']:.6f}"]
                )
    with (HERE / "recall_runs.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerows(rows)


def _interval(values: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and its Student-t interval at `level` (n - 1 degrees of freedom)."""
    mean = statistics.fmean(values)
    half = t_quantile(1 - (1 - level) / 2, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def _read(directory: Path) -> list[dict[str, str]]:
    with (directory / "recall_runs.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def markdown(rows: list[dict[str, str]]) -> str:
    accuracy: dict[tuple[str, int, str], dict[int, float]] = {}
    for row in rows:
        key = (row["arm"], int(row["pairs"]), row["distance"])
        accuracy.setdefault(key, {})[int(row["seed"])] = float(row["accuracy"])
    arms = [a for a in ARMS.values() if any(k[0] == a for k in accuracy)]
    pair_counts = sorted({k[1] for k in accuracy})
    out = io.StringIO()
    out.write("# Associative recall by arm (zoo-eval probe=recall)\n\n")
    out.write(
        "Accuracy at the queries of 300 sequences per pair count (seed 1), the mean over each arm's "
        "seeds and its 95% Student-t interval; chance 0.0312. Trained at 8 pairs.\n\n"
    )
    out.write("| arm | seeds | " + " | ".join(f"{n} pairs" for n in pair_counts) + " |\n")
    out.write("|---|---|" + "---|" * len(pair_counts) + "\n")
    for arm in arms:
        cells = []
        for n in pair_counts:
            mean, low, high = _interval(list(accuracy[(arm, n, "all")].values()))
            cells.append(f"{mean:.4f} [{low:.4f}, {high:.4f}]")
        out.write(f"| {arm} | {len(accuracy[(arm, pair_counts[0], 'all')])} | " + " | ".join(cells) + " |\n")
    m = len(arms) - 1
    out.write(
        f"\n## Each arm against {BASELINE}, paired over seeds\n\n"
        f"Difference in accuracy (arm − {BASELINE}), its 95% interval, the interval adjusted over the "
        f"{m} comparisons of its pair count (Bonferroni, {100 * (1 - 0.05 / m):.2f}%), and the p-value "
        "of no difference with Holm's adjusted value; one family per pair count.\n\n"
    )
    out.write("| pairs | arm | Δ accuracy [95% CI] | adjusted interval | p (Holm) |\n|---|---|---|---|---|\n")
    for n in pair_counts:
        base = accuracy[(BASELINE, n, "all")]
        found = [(arm, difference(accuracy[(arm, n, "all")], base)) for arm in arms[1:]]
        holm([d for _, d in found])
        for arm, d in found:
            wide = difference(accuracy[(arm, n, "all")], base, level=1 - 0.05 / m)
            assert d is not None and wide is not None, (arm, n)  # every arm ran every seed
            out.write(
                f"| {n} | {arm} | {d.mean:+.4f} [{d.low:+.4f}, {d.high:+.4f}] | [{wide.low:+.4f}, {wide.high:+.4f}] | "
                f"{d.p:.3f} (Holm {d.p_holm:.3f}) |\n"
            )
    bins = [d for d in dict.fromkeys(r["distance"] for r in rows if int(r["pairs"]) == TRAINED_PAIRS) if d != "all"]
    out.write(
        f"\n## By distance from key to query, at {TRAINED_PAIRS} pairs\n\n"
        "Accuracy over the queries of all seeds together (queries in brackets).\n\n"
    )
    out.write("| arm | " + " | ".join(bins) + " |\n|---|" + "---|" * len(bins) + "\n")
    for arm in arms:
        cells = []
        for distance in bins:
            hits = [
                r for r in rows if r["arm"] == arm and int(r["pairs"]) == TRAINED_PAIRS and r["distance"] == distance
            ]
            queries = sum(int(r["queries"]) for r in hits)
            correct = sum(int(r["correct"]) for r in hits)
            cells.append(f"{correct / queries:.4f} ({queries})" if queries else "–")
        out.write(f"| {arm} | " + " | ".join(cells) + " |\n")
    return out.getvalue()


def generate(directory: Path) -> dict[str, str]:
    """recall.md, from recall_runs.csv in `directory`."""
    return {"recall.md": markdown(_read(directory))}


def main(argv: list[str]) -> None:
    if argv[:1] == ["collect"]:
        collect(argv[1:])
        return
    for name, text in generate(HERE).items():
        (HERE / name).write_text(text)


if __name__ == "__main__":
    main(sys.argv[1:])
