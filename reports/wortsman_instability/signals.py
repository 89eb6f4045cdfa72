"""The instability signals of the Wortsman et al. 2023 reproduction, by mitigation, width and
learning rate: the final val/loss, the maximum attention logit, the output logits' mean and
log Z at the end of training (means over seeds, from the report's runs.csv), and the output
logits' mean over training (trajectories.csv, collected from each run's metrics.csv); and each
mitigation against the baseline of its own width, paired over seeds, on the held-out loss and on
the learning-rate sensitivity (heldout.csv: each seed's values), one Holm family of 6
comparisons per measure, with intervals at the Bonferroni level 1 - 0.05/6.

    python reports/wortsman_instability/signals.py collect SWEEP [SWEEP ...]   # -> trajectories.csv
    python reports/wortsman_instability/signals.py                            # -> signals.md, signals.png

Both read and write beside this file; runs.csv is zoo-compare's per-run table of the sweeps.
`zoo-compare recompute=` makes signals.md again from the rebuilt tables (`generate`) and
compares it line by line with this one."""

from __future__ import annotations

import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIGNALS = {
    "val/loss": "final val/loss (nats per token)",
    "train/max_attn_logit": "max attention logit at the end",
    "train/output_logit_mean": "output logits' mean at the end",
    "train/log_z_mean": "log Z at the end",
}
MITIGATIONS = ("baseline", "qk_norm", "z_loss", "both")
TRACE = "train/output_logit_mean"
# what recompute= makes again (`generate`), and the input no table rebuilds (only the plot reads it)
GENERATES = ("signals.md",)
MEASURED = {
    "trajectories.csv": "collected from each run's metrics.csv: "
    "python reports/wortsman_instability/signals.py collect SWEEP ..."
}


def mitigation(row: dict) -> str:
    """The arm's mitigation from its settings: QK-norm on or off, z-loss on or off."""
    qk = row.get("model.qk_norm", "none") not in ("", "none", "(unset)")
    z = (number(row.get("task.z_loss")) or 0.0) > 0
    return {(False, False): "baseline", (True, False): "qk_norm", (False, True): "z_loss", (True, True): "both"}[
        (qk, z)
    ]


def number(text: str) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value


def table(path: Path) -> dict[tuple[str, int, float], dict[str, list[float]]]:
    """(mitigation, d_model, lr) -> signal -> the values over the seeds that finished."""
    cells: dict = defaultdict(lambda: defaultdict(list))
    with path.open() as handle:
        for row in csv.DictReader(handle):
            key = (mitigation(row), int(float(row["model.d_model"])), float(row["optim.lr"]))
            cells[key]["runs"].append(1.0)
            if row["status"] != "finished":
                continue
            for signal in SIGNALS:
                value = number(row.get(signal, ""))
                if value is not None:
                    cells[key][signal].append(value)
    return cells


def arms(path: Path) -> dict[str, tuple[str, int]]:
    """report.csv's arm name -> (mitigation, d_model)."""
    with path.open() as handle:
        return {
            row["arm"].removesuffix(" (baseline)"): (mitigation(row), int(float(row["model.d_model"])))
            for row in csv.DictReader(handle)
        }


def within_width(directory: Path) -> list[str]:
    """Each mitigation against the baseline at the same width, paired over seeds."""
    from zoo.compare.stats import difference, holm

    names = arms(directory / "report.csv")
    seeds: dict = defaultdict(lambda: defaultdict(dict))  # measure -> (mitigation, width) -> {seed: value}
    with (directory / "heldout.csv").open() as handle:
        for row in csv.DictReader(handle):
            where = names[row["arm"]]
            for measure in ("val/loss", "sensitivity"):
                if number(row[measure]) is not None:
                    seeds[measure][where][row["seed"]] = float(row[measure])
    m = 6
    level = 1 - 0.05 / m
    lines = [
        "## Each mitigation against the baseline of its own width",
        "",
        "Paired over seeds 0-2 (heldout.csv); Δ = mitigation − baseline; one Holm family of "
        f"{m} comparisons per measure; the adjusted interval is at the {level:.2%} level (Bonferroni).",
        "",
    ]
    for measure, title in (
        ("val/loss", "held-out val/loss at each arm's own rate"),
        ("sensitivity", "learning-rate sensitivity (Wortsman et al. 2023, §2.2)"),
    ):
        rows, diffs = [], []
        for width in sorted({w for _, w in seeds[measure]}):
            base = seeds[measure][("baseline", width)]
            for arm in MITIGATIONS[1:]:
                wide = difference(seeds[measure][(arm, width)], base, level=level)
                plain = difference(seeds[measure][(arm, width)], base)
                diffs.append(plain)
                rows.append((width, arm, plain, wide))
        holm(diffs)
        lines += [
            f"### {title}",
            "",
            "| d_model | mitigation | Δ [95% CI] | adjusted interval | p (Holm) |",
            "|---|---|---|---|---|",
        ]
        for width, arm, plain, wide in rows:
            ci = (
                f"{plain.mean:+.4f} [{plain.low:+.4f}, {plain.high:+.4f}]"
                if plain.low is not None
                else f"{plain.mean:+.4f} ({plain.flag})"
            )
            adj = f"[{wide.low:+.4f}, {wide.high:+.4f}]" if wide.low is not None else "–"
            p = f"{plain.p:.3f} ({plain.p_holm:.3f})" if plain.p is not None else "–"
            lines.append(f"| {width} | {arm} | {ci} | {adj} | {p} |")
        lines.append("")
    return lines


def markdown(cells, directory: Path) -> str:
    widths = sorted({w for _, w, _ in cells})
    rates = sorted({r for _, _, r in cells})
    lines = [
        "# Instability signals by mitigation, width and peak learning rate",
        "",
        "Means over the seeds that finished (the count in brackets where fewer than all ran to the end; "
        "– where none did). Generated by `signals.py` from runs.csv.",
        "",
        *within_width(directory),
    ]
    for signal, title in SIGNALS.items():
        for width in widths:
            lines += [
                f"## {title}, d_model {width}",
                "",
                "| mitigation | " + " | ".join(f"{r:g}" for r in rates) + " |",
                "|---|" + "---|" * len(rates),
            ]
            for arm in MITIGATIONS:
                row = []
                for rate in rates:
                    cell = cells.get((arm, width, rate), {})
                    values, runs = cell.get(signal, []), len(cell.get("runs", []))
                    if not values:
                        row.append("–")
                        continue
                    text = f"{statistics.fmean(values):.3f}"
                    row.append(text if len(values) == runs else f"{text} ({len(values)}/{runs})")
                lines.append(f"| {arm} | " + " | ".join(row) + " |")
            lines.append("")
    return "\n".join(lines)


def collect(sweeps: list[str]) -> None:
    """trajectories.csv: every run's output-logit mean at each logged step."""
    rows = []
    for sweep in sweeps:
        for run in sorted(Path(sweep).iterdir()):
            metrics, config = run / "metrics.csv", run / "config.yaml"
            if not metrics.is_file() or not config.is_file():
                continue
            import yaml

            cfg = yaml.safe_load(config.read_text())
            settings = {
                "model.qk_norm": cfg["model"].get("qk_norm", "none"),
                "task.z_loss": cfg["task"].get("z_loss", 0.0),
            }
            with metrics.open() as handle:
                for line in csv.DictReader(handle):
                    value = number(line.get(TRACE, ""))
                    if value is not None:
                        rows.append(
                            [
                                Path(sweep).name,
                                run.name,
                                mitigation(settings),
                                cfg["model"]["d_model"],
                                cfg["optim"]["lr"],
                                cfg["seed"],
                                int(line["step"]),
                                value,
                            ]
                        )
    with (HERE / "trajectories.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sweep", "run", "mitigation", "model.d_model", "optim.lr", "seed", "step", TRACE])
        writer.writerows(rows)


def plot(cells) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    widths = sorted({w for _, w, _ in cells})
    shown = ["val/loss", "train/max_attn_logit", "train/output_logit_mean"]
    fig, axes = plt.subplots(len(widths), len(shown) + 1, figsize=(16, 3.6 * len(widths)), squeeze=False)
    colours = dict(zip(MITIGATIONS, ("black", "tab:blue", "tab:orange", "tab:green")))
    markers = dict(zip(MITIGATIONS, ("o", "s", "^", "x")))
    traces = defaultdict(list)
    path = HERE / "trajectories.csv"
    if path.is_file():
        with path.open() as handle:
            for row in csv.DictReader(handle):
                traces[(row["mitigation"], int(row["model.d_model"]), float(row["optim.lr"]))].append(
                    (int(row["step"]), float(row[TRACE]))
                )
    for i, width in enumerate(widths):
        for j, signal in enumerate(shown):
            ax = axes[i][j]
            for arm in MITIGATIONS:
                points = sorted(
                    (rate, statistics.fmean(c[signal]))
                    for (a, w, rate), c in cells.items()
                    if a == arm and w == width and c.get(signal)
                )
                if points:
                    ax.plot(
                        *zip(*points),
                        marker=markers[arm],
                        ms=4,
                        color=colours[arm],
                        label=arm,
                        fillstyle="none",
                        linestyle="-" if arm in ("baseline", "qk_norm") else "--",
                    )
            ax.set_xscale("log")
            if signal == "train/max_attn_logit":
                ax.set_yscale("log")  # it spans 3 to 1e6
            ax.set_xlabel("peak learning rate")
            ax.set_ylabel("nats per token" if signal == "val/loss" else "logit")
            ax.set_title(f"{SIGNALS[signal]}\nd_model {width}, mean of seeds", fontsize=8)
        ax = axes[i][-1]
        top = max((r for (a, w, r) in traces if w == width), default=None)
        for arm in MITIGATIONS:
            by_step = defaultdict(list)
            for step, value in traces.get((arm, width, top), []):
                by_step[step].append(value)
            if by_step:
                steps = sorted(by_step)
                ax.plot(steps, [statistics.fmean(by_step[s]) for s in steps], color=colours[arm], label=arm)
        ax.set_xlabel("step")
        ax.set_ylabel("logit")
        ax.set_title(f"output logits' mean during training\nd_model {width}, lr {top:g}, mean of seeds", fontsize=8)
    axes[0][0].legend(loc="upper center", fontsize=7, title="mitigation", title_fontsize=7)
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, title="mitigation")
    fig.tight_layout()
    fig.savefig(HERE / "signals.png", dpi=110)


def main(argv: list[str]) -> None:
    if argv[:1] == ["collect"]:
        collect(argv[1:])
        return
    for name, text in generate(HERE).items():
        (HERE / name).write_text(text)
    plot(table(HERE / "runs.csv"))


def generate(directory: Path) -> dict[str, str]:
    """signals.md, from the runs.csv, report.csv and heldout.csv in `directory`."""
    return {"signals.md": markdown(table(directory / "runs.csv"), directory) + "\n"}


if __name__ == "__main__":
    main(sys.argv[1:])
