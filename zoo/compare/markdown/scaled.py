"""report.md of a scaled comparison (`zoo.compare.scale`): the verdict, the method in words, the
design table (N, D, D/N, epochs, compute and seeds per size), each arm's fit and multipliers."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zoo.compare import scaled_options as options
from zoo.compare.design import FLAG_SENTENCE, RUNS_SENTENCE, design_line, problem_lines
from zoo.compare.escape import code, text
from zoo.compare.markdown.transfer import change_lines, decision_lines, scaled_power_lines
from zoo.compare.multipliers import BOOTSTRAP, BOX, LEVEL
from zoo.compare.report import status_of
from zoo.compare.runs import BACKWARD_FACTOR, trains_more_than_it_keeps
from zoo.compare.scaled_arms import Size
from zoo.compare.tune import _order
from zoo.compare.verdict import label
from zoo.config.records.atomic import write_text

if TYPE_CHECKING:
    from zoo.compare.scale import ScaleReport


def _sci(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * (math.exp(value) - 1):+.1f}%"


def _training_only(report: ScaleReport) -> str:
    """The words for the modules that run only in training, where any run has them."""
    if not trains_more_than_it_keeps([r for arm in report.arms for r in arm.runs]):
        return ""
    return ", and those of the modules that run only in training, task.mtp_depth's, which N leaves out"


def write_scaled_markdown(report: ScaleReport, path: Path, dirs) -> Path:
    m, k = text(report.metric), text(report.key)  # copied from runs and the command line, like the keys
    form = "e + a · C^-b" if report.irreducible else "a · C^-b"
    tuned = (
        f" Each arm at each size is taken at its own best {code(report.tune)}: each seed measured at the value "
        f"chosen on the other seeds (leave one seed out), so no seed both chooses and measures."
        if report.tune
        else ""
    )
    lines = [
        f"# Sweep comparison across {k}: {m} against training compute",
        "",
        text(" ".join(p for p in (report.verdict(), options.sentences(report)) if p)),
        "",
        f"Runs from {', '.join(code(d) for d in dirs)}. A size is one value of {code(report.key)}"
        + (f" (with {', '.join(code(x) for x in report.linked)}, which change with it)" if report.linked else "")
        + f"; an arm is a config without its seed and size.{tuned} Training compute C = {BACKWARD_FACTOR} × "
        f"forward FLOPs per token (the summary's: 2 per weight of every matrix multiply, plus attention's "
        f"4·S·H·Dh per layer{_training_only(report)}) × tokens seen D; N counts non-embedding parameters; epochs = D over the "
        f"training split's tokens. Each arm's {m} (mean over seeds) is fitted as {m} = {form} by least "
        f"squares on log {m}; the residual at each size is the measured {m} against the fit's, in percent. "
        f"The exponent's {int(LEVEL * 100)}% interval is the wider of a seed bootstrap ({BOOTSTRAP} resamples "
        f"of the seeds within each size, refitted) and the fit's own misfit (b ± t · se, on the fit's "
        f"residual degrees of freedom).",
        "",
        f"The compute multiplier of an arm at a size is the compute the baseline needs to reach the arm's "
        f"measured {m} there, divided by the arm's compute there; the baseline's curve there is its fit "
        f"moved through its own measured {m} at that size: M = (C_base / C_arm) · ((L_base − e) / "
        f"(L_arm − e))^(1/b). M > 1: the arm reaches its loss with less compute than the baseline would "
        f"need; an arm measured worse at equal compute always has M < 1. Its interval "
        f"is the range of M over two intervals together (each at {BOX * 100:.1f}% for one multiplier; "
        f"adjusted for the family below): the Student-t interval of the "
        f"difference in log({m} − e) between the arms' seeds at that size (paired when they ran the same "
        f"seeds) and the baseline's exponent interval; an interval that spans 1 does not say which arm "
        f"needs less compute. {FLAG_SENTENCE} {RUNS_SENTENCE}",
        "",
        text(report.family_sentence()),
        "",
    ]
    lines += ["## Design", "", design_line([r for a in report.arms for r in a.runs]), ""] + _design_lines(report)
    all_sizes: dict[str, Any] = {}
    for arm in report.arms:
        for s in arm.sizes:
            all_sizes.setdefault(repr(s.value), s.value)
    values = sorted(all_sizes.values(), key=_order)
    sizes = [text(f"{report.key}={v}") for v in values]
    head = ["arm", *map(text, report.keys), "fit", "fit error (rms)", "exponent b [95% CI]", *sizes, "runs"]
    lines += [
        "## Fits",
        "",
        f"Each size: {m} mean ± std over seeds (residual against the fit)"
        + (f"; the chosen {text(report.tune)}" if report.tune else "")
        + ".",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for arm in report.arms:
        by_size = {repr(s.value): s for s in arm.sizes}
        exponent = (
            "–"
            if arm.fit is None
            else (
                f"{arm.fit.b:.4f}"
                + (f" [{arm.exponent_low:.4f}, {arm.exponent_high:.4f}]" if arm.exponent_low is not None else "")
            )
        )
        cells = [
            arm.name + (" (baseline)" if arm is report.baseline else ""),
            *[code(arm.settings[x]) for x in report.keys],
            str(arm.fit) if arm.fit else f"none: {arm.no_fit}",
            f"{100 * arm.fit.rmse_log:.2f}% ({arm.fit.df} df)" if arm.fit else "–",
            exponent,
        ]
        for v in values:
            own = by_size.get(repr(v))
            if own is None or own.mean is None:
                cells.append("–")
                continue
            spread = f" ± {own.std:.4f}" if len(own.finals) > 1 else ""
            text_ = f"{own.mean:.4f}{spread} (n={len(own.finals)}, {_pct(own.residual)})"
            if report.tune:
                text_ += f", {code(f'{report.tune}={own.tuned}')}"
            cells.append(text_)
        cells.append(status_of(arm.runs))
        lines.append("| " + " | ".join(cells) + " |")
    lines += problem_lines([r for a in report.arms for r in a.runs], report.unreadable)
    others = [a for a in report.arms if a is not report.baseline]
    if others:
        head = ["arm", *map(text, report.keys), *sizes]
        lines += [
            "",
            f"## Compute multiplier against the baseline ({report.baseline.name})",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
        ]
        for arm in others:
            multiplier_at = {repr(x.size): x for x in arm.multipliers}
            lines.append(
                "| "
                + " | ".join(
                    [
                        arm.name,
                        *[code(arm.settings[x]) for x in report.keys],
                        *[str(multiplier_at.get(repr(v), "–")) for v in values],
                    ]
                )
                + " |"
            )
        largest = values[-1] if values else None
        if largest is not None:
            parts = []
            for arm in others:
                at = next((x for x in arm.multipliers if repr(x.size) == repr(largest)), None)
                if at is None or at.value is None:
                    parts.append(f"{arm.name} –")
                else:  # a multiplier without an interval already says why in its note
                    parts.append(f"{arm.name} {at}" + ("" if at.low is None else f" ({at.verdict})"))
            lines += ["", f"At the largest size ({text(f'{report.key}={largest}')}): " + "; ".join(parts) + "."]
    if report.decisions is not None:  # decisions across sizes and each size's power (zoo.compare.transfer)
        lines += decision_lines(report.decisions, report.metric, {a.name: label(a) for a in report.arms})
    lines += change_lines(report.changes, report.metric, report.key)
    lines += scaled_power_lines(report)
    lines += options.lines(report)  # equivalence=, threshold=, last_k= at each size
    if report.warnings:
        lines += ["", "## Warnings", "", *[f"- {text(w)}" for w in report.warnings]]
    if "scaling" in report.files:
        lines += ["", f"![{m} against training compute, log-log, one colour per arm]({report.files['scaling'].name})"]
    if "decisions" in report.files:
        lines += ["", f"![decision accuracy against {k}; held-out-size predictions]({report.files['decisions'].name})"]
    write_text(path, "\n".join(lines) + "\n")
    return path


def _design_lines(report: ScaleReport) -> list[str]:
    """The design table: per size, N, D, D/N, epochs and seeds (from the baseline's runs, or the
    first arm with results there)."""
    by_value: dict[str, Size] = {}
    for arm in [report.baseline, *report.arms]:
        for s in arm.scored:
            by_value.setdefault(repr(s.value), s)
    if not by_value:
        return []
    sizes = sorted(by_value.values(), key=lambda s: _order(s.value))
    lines = [
        f"| {text(report.key)} | N (non-emb., active) | N total | D (tokens) | D/N | epochs | compute C | seeds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in sizes:
        seeds = sorted({len(x.finals) for a in report.arms for x in a.scored if repr(x.value) == repr(s.value)})
        lines.append(
            f"| {code(s.value)} | {_count(s.params)} | {_count(s.total_params)} | {_count(s.tokens)} | "
            f"{'–' if s.tokens_per_param is None else f'{s.tokens_per_param:.2f}'} | "
            f"{'–' if s.epochs is None else f'{s.epochs:.2f}'} | {_sci(s.compute)} | "
            f"{seeds[0] if seeds[0] == seeds[-1] else f'{seeds[0]}–{seeds[-1]}'} |"
        )
    return lines + [""]


def _count(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"
