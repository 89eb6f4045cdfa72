"""report.md of a tuned comparison (`zoo.compare.tune`): the verdict, how each arm's best value
was chosen and measured, the table of arms at their best values with their differences and
sensitivities, each arm's curve against the tuned key, and the runs left out."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from zoo.compare.design import (
    FLAG_SENTENCE,
    RUNS_SENTENCE,
    problem_lines,
    table_opening,
)
from zoo.compare.escape import code, text
from zoo.compare.markdown.plain import option_lines, option_sentences
from zoo.compare.markdown.power import power_lines
from zoo.compare.report import status_of
from zoo.compare.verdict import lower_is_better, pair_lines, verdict
from zoo.config.records.atomic import write_text

if TYPE_CHECKING:
    from zoo.compare.tune import TunedReport


def write_tuned_markdown(report: TunedReport, path: Path, dirs) -> Path:
    m, k = text(report.metric), text(report.key)  # copied from runs and the command line, like the keys
    better = "lowest" if lower_is_better(report.metric) else "highest"
    head = [
        "arm",
        *map(text, report.keys),
        f"best {k}",
        f"{m} at it (mean ± std)",
        f"{m} held out",
        "Δ vs baseline [95% CI]",
        "adjusted interval",
        "p (Holm)",
        f"{m} by {k}",
        f"sensitivity to {k} [95% CI]",
        "runs",
    ]
    means = {a.name: (sum(a.held_out().values()) / len(a.held_out()) if a.held_out() else None) for a in report.arms}
    lines = [
        f"# Sweep comparison at each arm's own {k}: {m}",
        "",
        text(
            " ".join(
                p
                for p in (
                    verdict(
                        report.arms,
                        means,
                        report.baseline,
                        report.metric,
                        pairs=report.pairs,
                        what="mean held-out",
                        seeds={a.name: len(a.held_out()) for a in report.arms},
                    ),
                    option_sentences(
                        report,
                        f"; on the held-out values, each seed at the {report.key} chosen on its arm's other seeds",
                    ),
                )
                if p
            )
        ),
        "",
        f"Runs from {', '.join(code(d) for d in dirs)}. An arm is a config without its seed and "
        f"without {k}; each arm is shown at the {k} with the {better} mean final {m} over its seeds "
        f"(marked * in the curve). To measure without the winner's curse, each seed counts at the {k} "
        f'chosen on the arm\'s other seeds (leave one seed out: "held out", mean over seeds); Δ = arm − '
        f"baseline on those held-out values, with a 95% Student-t interval (paired over seeds when both ran "
        f"the same seeds, Welch otherwise) and the p-value of no difference (Holm-adjusted in brackets when "
        f"several arms face the baseline). A value of {k} at which any run ended without a final result (failed, "
        f"diverged, unfinished) is failed for tuning: never chosen, never averaged over the seeds that "
        f"finished (its mean in the curve covers those seeds only). {FLAG_SENTENCE} Sensitivity to {k} "
        f"(Wortsman et al. 2023): per seed, the mean over the values tried of min(L, L0) − L*, L* the seed's "
        f"best final loss over them and L0 = ln V, the loss of a uniform prediction over the vocabulary "
        f"(the loss at initialisation, which runs do not record); a failed run counts as L0; mean over seeds "
        f"with a 95% Student-t interval (lower: less sensitive). Each seed's held-out value and sensitivity "
        f"are in heldout.csv. {RUNS_SENTENCE}",
        "",
        *table_opening(report.family, [r for a in report.arms for r in a.runs], head),
    ]
    for arm in report.arms:
        best = arm.best
        value = (
            "no finished run"
            if not best
            else f"{best.mean:.4f} (n=1, no spread)"
            if best.seeds == 1
            else f"{best.mean:.4f} ± {best.std:.4f} (n={best.seeds})"
        )
        diff = "baseline" if arm is report.baseline else (str(arm.diff) if arm.diff else "–")
        curve = ", ".join(
            f"{text(p.value)}: {'–' if p.mean is None else f'{p.mean:.4f}'}{'*' if p is best else ''}"
            for p in arm.points
        )
        status = status_of(arm.runs)
        held = arm.held_out()
        held_text = f"{sum(held.values()) / len(held):.4f} (n={len(held)})" if held else "–"
        p_text = "" if arm is report.baseline else (arm.diff.p_text() if arm.diff else "–")
        failed = set(arm.choice.failed) if arm.choice else set()
        curve += "".join(f" ({text(p.value)} failed for tuning)" for i, p in enumerate(arm.points) if i in failed)
        sensitivity = str(arm.sensitivity) if arm.sensitivity else f"– ({text(arm.no_sensitivity)})"
        adj = (
            ""
            if arm is report.baseline
            else "–"
            if not arm.diff or arm.diff.adj_low is None
            else f"[{arm.diff.adj_low:+.4f}, {arm.diff.adj_high:+.4f}]"
        )
        cells = [
            arm.name + (" (baseline)" if arm is report.baseline else ""),
            *[code(arm.settings[x]) for x in report.keys],
            code(best.value) if best else "–",
            value,
            held_text,
            diff,
            adj,
            p_text,
            curve,
            sensitivity,
            status,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if report.pairs is not None:
        lines += pair_lines(report.pairs, report.metric)
    lines += option_lines(report, held_note(report.key))
    lines += problem_lines([r for a in report.arms for r in a.runs], report.unreadable)
    others = [a for a in report.arms if a is not report.baseline]  # the design's power (zoo.compare.power)
    lines += power_lines(
        [a.held_out() for a in others], report.baseline.held_out(), [(a.name, a.diff) for a in others], report.metric
    )
    if report.warnings or report.notes:
        lines += ["", "## Warnings", "", *[f"- {text(w)}" for w in report.warnings + report.notes]]
    if "tuning" in report.files:
        lines += ["", f"![final {m} against {k}, one line per arm]({report.files['tuning'].name})"]
    if "routing" in report.files:
        lines += ["", f"![expert load per mixture layer, each arm at its best {k}]({report.files['routing'].name})"]
    write_text(path, "\n".join(lines) + "\n")
    return path


def held_note(key: str) -> str:
    """What equivalence=, threshold= and the noise beyond seeds read in a report tuned on `key`."""
    return (
        f"With tune={key} these read the held-out values: each seed of an arm at the {key} chosen on the "
        f"arm's other seeds (leave one seed out), the values Δ above compares, so no seed both chose the "
        f"value and is measured at it; a run's last-k spread is that of the runs those values come from, "
        f"and the split between init and data-order seeds is over the runs at the arm's best {key} (one "
        f"setting: a split across values would count the value's effect as the seeds')."
    )
