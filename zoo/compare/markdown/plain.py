"""report.md of a plain comparison (`zoo.compare.report`): the verdict, the design, the table of
arms with their differences to the baseline, the family of comparisons and, with lengths=, the
loss at each evaluation length (also written as lengths.csv)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING

from zoo.compare import equivalence, noise, threshold
from zoo.compare.committed_lengths import NO_RUN, RULE, row_label
from zoo.compare.design import FLAG_SENTENCE, RUNS_SENTENCE, problem_lines, table_opening
from zoo.compare.escape import code, csv_cell, text
from zoo.compare.markdown.power import power_lines
from zoo.compare.plots import half_width
from zoo.compare.stats import FEW_SEEDS, ZERO_SPREAD, mean_std
from zoo.compare.verdict import direction, pair_lines, unit, verdict
from zoo.config.records.atomic import replacing, write_text

if TYPE_CHECKING:
    from zoo.compare.report import Report
    from zoo.compare.tune import TunedReport


def write_lengths_csv(report: Report, path: Path) -> Path:
    """lengths.csv: a row per arm (and RoPE rule, in a `rope_scaling` column where the table has
    a rule's rows) and multiple."""
    ruled = any(row.get("rule") for row in report.lengths)
    with replacing(path) as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "arm",
                *[RULE] * ruled,
                *map(csv_cell, report.keys),
                "eval_len",
                "multiple",
                "ppl_mean",
                "ppl_std",
                "ppl_low",
                "ppl_high",
                "runs",
                "note",
            ]
        )
        for row in report.lengths:
            arm, rule = row["arm"], [row.get("rule") or ""] * ruled
            for m, cell in row["cells"].items():
                length = row["trained"] * m if row["trained"] else ""
                settings = [csv_cell(arm.settings.get(k, "")) for k in report.keys]
                if isinstance(cell, tuple):
                    low, high = _mean_interval(*cell)
                    note = "" if low is not None else FEW_SEEDS if cell[2] < 2 else ZERO_SPREAD
                    writer.writerow(
                        [
                            arm.name,
                            *rule,
                            *settings,
                            length,
                            m,
                            cell[0],
                            cell[1],
                            low if low is not None else "",
                            high if high is not None else "",
                            cell[2],
                            note,
                        ]
                    )
                else:
                    writer.writerow([arm.name, *rule, *settings, length, m, "", "", "", "", 0, cell or NO_RUN])
    return path


def _mean_interval(mean: float, std: float, n: int) -> tuple[float | None, float | None]:
    """The 95% Student-t interval of a mean of `n` values with sample deviation `std` (the error
    bar lengths.png draws; None, None for fewer than 2 values or no spread)."""
    if n < 2 or not std:
        return None, None
    half = half_width(std, n)
    return mean - half, mean + half


def _length_lines(report: Report) -> list[str]:
    trained = {row["trained"] for row in report.lengths}
    base = trained.pop() if len(trained) == 1 else None
    cols = [f"{m}× ({base * m})" if base else f"{m}×" for m in report.multiples]
    lines = [
        "",
        "## Length extrapolation",
        "",
        "Validation perplexity at multiples of the trained context: the mean over seeds and its 95% Student-t "
        "interval (n seeds, n − 1 degrees of freedom); each arm's values in lengths.csv. The intervals describe "
        "each arm at each length and are not in the report's family.",
        *_rule_sentence(report),
        "",
        "| arm | " + " | ".join([*map(text, report.keys), *cols]) + " |",
        "|" + "---|" * (1 + len(report.keys) + len(cols)),
    ]
    for row in report.lengths:
        cells = []
        for m in report.multiples:
            cell = row["cells"][m]
            if isinstance(cell, tuple):
                low, high = _mean_interval(*cell)
                cells.append(
                    f"{cell[0]:.2f} [{low:.2f}, {high:.2f}]"
                    if low is not None
                    else f"{cell[0]:.2f} ({FEW_SEEDS if cell[2] < 2 else ZERO_SPREAD}: no interval)"
                )
            else:
                cells.append(cell or "–")
        settings = [code(row["arm"].settings[k]) for k in report.keys]
        lines.append("| " + " | ".join([row_label(row), *settings, *cells]) + " |")
    return lines


def _rule_sentence(report: Report) -> list[str]:
    """What an `ARM + RULE` row is, where the table has one."""
    rules = list(dict.fromkeys(row["rule"] for row in report.lengths if row.get("rule")))
    if not rules:
        return []
    return [
        "",
        "An arm named `+ RULE` ("
        + ", ".join(rules)
        + ") is the same checkpoints evaluated with that RoPE context-extension rule stretching the trained "
        "context by each multiple (`zoo-eval ... model.position.scaling=RULE model.position.scale=m`, with "
        "`model.position.original_max_seq_len=TRAINED` for the rules that read it, every other rule key at its "
        "default); at 1× it is plain RoPE; a cell marked `the rule does not apply` is a latent-attention "
        "checkpoint (model.kv=latent), whose shared key rotates with plain RoPE only.",
    ]


def _num(value, digits: int = 4) -> str:
    if value is None:
        return "–"
    if abs(value) >= 1e4:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


THROUGHPUT_SENTENCE = (  # under the table: runs carry no interleaved measurement of their speed
    "tokens/s is each run's logged wall-clock throughput (tokens over its training time), from runs that "
    "ran one after another, not measured interleaved: it moves with the machine's load during each run as "
    "well as with the arm (`zoo-bench` measures arms interleaved)."
)


def opening(report: Report, means: dict) -> str:
    """The verdict, then what equivalence= and threshold= conclude, where given."""
    seeds = {a.name: len(a.finals(report.metric)) for a in report.arms}
    parts = [verdict(report.arms, means, report.baseline, report.metric, pairs=report.pairs, seeds=seeds)]
    return " ".join(p for p in [*parts, option_sentences(report)] if p)


def option_sentences(report: Report | TunedReport, on: str = "") -> str:
    """What equivalence= and threshold= conclude, where given (`on`: what the values are, where
    not the final ones: a tuned report's held-out values)."""
    parts = []
    if report.equivalent:
        parts.append(equivalence.sentence(report.equivalent, unit(report.metric), on))
    lower = direction(report.metric)
    if report.target is not None and lower is not None:
        parts.append(threshold.sentence(report.reach, report.target, report.metric, lower, on))
    return " ".join(p for p in parts if p)


def option_lines(report: Report | TunedReport, note: str = "") -> list[str]:
    """The sections of equivalence=, threshold= and the noise beyond seeds, where they apply (each
    escapes what it copies from runs; `note`: a sentence in each, saying what the values are
    where not the final ones)."""
    out = equivalence.lines(report.equivalent, report.metric, note)
    lower = direction(report.metric)
    if report.target is not None and lower is not None:
        out += threshold.lines(report.reach, report.target, report.metric, lower, note)
    return out + noise.lines(report.noise, report.last_k, report.parts, report.metric, note)


def write_markdown(report: Report, path: Path, dirs) -> Path:
    m = report.metric
    m = text(m)  # (a metric name, like the keys, is copied from runs and command lines)
    load = report.load
    head = [
        "arm",
        *map(text, report.keys),
        f"{m} (mean ± std)",
        "Δ vs baseline [95% CI]",
        "adjusted interval",
        "p (Holm)",
        "params (non-emb.)",
        "FLOPs/token",
        "tokens",
        "tokens/s (logged wall-clock" + (", machine load †)" if load else ")"),
        "runs",
    ]
    means = {
        a.name: (mean_std(list(a.finals(report.metric).values()))[0] if a.finals(report.metric) else None)
        for a in report.arms
    }
    lines = [
        f"# Sweep comparison: {m}",
        "",
        text(opening(report, means)),
        "",
        f"Runs from {', '.join(code(d) for d in dirs)}. One row per arm (same config, different "
        f"seeds); columns are the settings that differ between arms. Final {m} of finished runs; "
        f"Δ = arm − baseline with a 95% Student-t interval (paired over seeds when both arms ran "
        f"the same seeds, Welch otherwise) and the two-sided p-value of no difference; with several arms, "
        f"Holm's adjusted p-value in brackets (it keeps the chance of any false finding among them at 5%). "
        f"An interval on 1 degree of freedom (2 seeds) is marked (1 df). {FLAG_SENTENCE} {RUNS_SENTENCE}",
        "",
        *table_opening(report.family, [r for a in report.arms for r in a.runs], head),
    ]
    for arm, row in zip(report.arms, report.rows()):
        mean, std = row[f"{report.metric} mean"], row[f"{report.metric} std"]
        value = (
            "no finished run"
            if mean is None
            else f"{mean:.4f} (n=1, no spread)"
            if row["seeds"] == 1
            else f"{mean:.4f} ± {std:.4f} (n={row['seeds']})"
        )
        diff = "baseline" if arm is report.baseline else (str(arm.diff) if arm.diff else "–")
        params = f"{_num(row['params'])} ({_num(row['non_embedding_params'])})"
        if row["active_non_embedding_params"] != row["non_embedding_params"]:  # a mixture: what a token passes through
            params += f", active {_num(row['active_non_embedding_params'])}"
        p_text = "" if arm is report.baseline else (arm.diff.p_text() if arm.diff else "–")
        adj = (
            ""
            if arm is report.baseline
            else "–"
            if not arm.diff or arm.diff.adj_low is None
            else f"[{arm.diff.adj_low:+.4f}, {arm.diff.adj_high:+.4f}]"
        )
        speed = _num(row["tokens_per_s"]) + (" †" if load and row["tokens_per_s"] is not None else "")
        cells = [
            row["arm"],
            *[code(arm.settings[k]) for k in report.keys],
            value,
            diff,
            adj,
            p_text,
            params,
            _num(row["flops_per_token"]),
            _num(row["tokens_seen"]),
            speed,
            row["status"],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", THROUGHPUT_SENTENCE]
    if load:
        lines += ["", text(f"† {load}.")]
    if report.pairs is not None:
        lines += pair_lines(report.pairs, report.metric)
    lines += option_lines(report)
    lines += problem_lines([r for a in report.arms for r in a.runs], report.unreadable)
    others = [a for a in report.arms if a is not report.baseline]  # the design's power (zoo.compare.power)
    lines += power_lines(
        [a.finals(report.metric) for a in others],
        report.baseline.finals(report.metric),
        [(a.name, a.diff) for a in others],
        report.metric,
    )
    if report.warnings:
        lines += ["", "## Warnings", "", *[f"- {text(w)}" for w in report.warnings]]
    if report.lengths:
        lines += _length_lines(report)
    for name, caption in (
        ("curves", "validation loss vs tokens"),
        ("final", f"final {m}"),
        ("lengths", "perplexity vs evaluation length"),
        ("routing", "expert load per mixture layer"),
    ):
        if name in report.files:
            lines += ["", f"![{caption}]({report.files[name].name})"]
    write_text(path, "\n".join(lines) + "\n")
    return path
