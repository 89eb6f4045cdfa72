"""A scaled report's sections on decisions across sizes (`zoo.compare.transfer`): the decision
accuracy per size and per pair, the held-out-size check, how each difference changes with size
(`zoo.compare.interaction`), and the power of each size's design (`zoo.compare.power`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zoo.compare.escape import code, text
from zoo.compare.interaction import Changes
from zoo.compare.power import ALPHA, POWER, design
from zoo.compare.stats import difference
from zoo.compare.transfer import RESAMPLES, Decisions
from zoo.compare.tune import _order

if TYPE_CHECKING:
    from zoo.compare.scale import ScaleReport


def scaled_power_lines(report: ScaleReport) -> list[str]:
    """Per size, the design of the arms' comparison with the baseline there (`power_lines`)."""
    base = {repr(s.value): s for s in report.baseline.scored}
    rows = []
    values = sorted({repr(s.value): s.value for a in report.arms for s in a.scored}.values(), key=_order)
    for value in values:
        own = base.get(repr(value))
        if own is None:
            continue
        cells = [(a, next((s for s in a.scored if repr(s.value) == repr(value)), None)) for a in report.arms]
        others = [(a, s) for a, s in cells if a is not report.baseline and s is not None]
        diffs = [(a.name, difference(s.seed_values(), own.seed_values())) for a, s in others]
        found = design([s.seed_values() for _, s in others], own.seed_values(), diffs)
        if found is None:
            rows.append(f"| {code(value)} | – | – | – | – | no spread | – |")
            continue
        need = found.needed_cell()
        unresolved = "none" if found.unresolved is None else f"{found.unresolved:+.4f} ({found.unresolved_name})"
        rows.append(
            f"| {code(value)} | {found.sd:.4f} | {'paired' if found.paired else 'two arms'} | {found.sd_test:.4f} | "
            f"{found.seeds} | {found.detectable:.4f} | {text(unresolved)} | {need} |"
        )
    if not rows:
        return []
    return [
        "",
        "## Power",
        "",
        f"Per size, from the seeds' spread there: σ the pooled within-arm standard deviation of {text(report.metric)}, "
        f"the t-test each arm's difference to the baseline takes (paired over seeds when they ran the same seeds: "
        f"its σ is that of the paired differences), the seeds per arm, the smallest true difference that design "
        f"detects with {POWER:.0%} probability at α = {ALPHA} (two-sided, per comparison), the largest difference "
        f"to the baseline whose 95% interval spans 0 and the seeds per arm it would need, were it the true one.",
        "",
        f"| {text(report.key)} | σ | test | σ of the test | seeds | detectable | largest unresolved | seeds it needs |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]


def _share(value: float) -> str:
    return f"{100 * value:.0f}%"


def decision_lines(found: Decisions, metric: str, names: dict[str, str]) -> list[str]:
    """ "## Decisions across sizes" and "## Held-out size": the tables of decisions.csv and
    extrapolation.csv in words (`names`: each arm's name with its settings)."""
    k, m = text(found.key), text(metric)
    lines = ["", "## Decisions across sizes", ""]
    if found.note:
        lines.append(text(f"No decision accuracy: {found.note}."))
    else:
        lines += [
            f"A decision orders two arms by their mean {m}. Each smaller size's decisions are set against those at "
            f"the largest size every arm reached ({code(f'{found.key}={found.largest}')}): the decision accuracy is "
            f"the fraction of the pairs ordered alike (on the means), and its 95% interval that of the fraction over "
            f"{RESAMPLES} bootstrap draws of the seeds (resampled within each arm and size, the largest size's too). "
            f"Spearman's ρ ranks the arms at a size against the largest (3 or more arms). Per pair, the share of "
            f"draws whose ordering matches the largest size's.",
            "",
            f"| {k} | pairs | accuracy (means) | bootstrap [95% CI] | Spearman ρ [95% CI] | at least {_share(found.rate)} |",
            "|---|---|---|---|---|---|",
        ]
        for s in found.sizes:
            rho = "–" if s.spearman is None else f"{s.spearman:+.2f}"
            if s.spearman_low is not None:
                rho += f" [{s.spearman_low:+.2f}, {s.spearman_high:+.2f}]"
            lines.append(
                f"| {code(s.size)} | {s.pairs} | {_share(s.accuracy)} | {_share(s.mean)} [{_share(s.low)}, "
                f"{_share(s.high)}] | {rho} | {'yes' if s.mean >= found.rate else 'no'} |"
            )
        sizes = [s.size for s in found.sizes]
        lines += [
            "",
            "| pair | " + " | ".join(text(f"{found.key}={v}") for v in sizes) + " |",
            "|---|" + "---|" * len(sizes),
        ]
        by_pair: dict[str, list[str]] = {}
        for p in found.pairs:
            by_pair.setdefault(f"{p.first} vs {p.second}", []).append(_share(p.rate))
        lines += [f"| {pair} | " + " | ".join(cells) + " |" for pair, cells in by_pair.items()]
        if found.smallest is None:
            said = f"No smaller size's decisions agree with the largest's in {_share(found.rate)} of the draws."
        elif found.smallest == found.sizes[0].size:
            said = (
                f"Every smaller size's decisions agree with the largest's in at least {_share(found.rate)} of the "
                f"draws, from the smallest ({found.key}={found.smallest}) on."
            )
        else:
            said = (
                f"From {found.key}={found.smallest} on, every smaller size's decisions agree with the largest's in "
                f"at least {_share(found.rate)} of the draws; below it they do not."
            )
        held = [s for s in found.sizes if s.low >= found.rate]
        said += (
            f" The 95% interval clears {_share(found.rate)} at {', '.join(f'{found.key}={s.size}' for s in held)}."
            if held
            else f" At no size does the 95% interval clear {_share(found.rate)}."
        )
        first = [pr for pr in found.pairs if pr.size == found.sizes[0].size]
        open_ = [f"{pr.first} vs {pr.second}" for pr in first if pr.resolved is False]
        if open_:
            said += (
                f" At {found.key}={found.largest}, {len(open_)} of the {len(first)} pairs differ by less than their "
                f"seeds resolve (95% interval spanning 0: {', '.join(open_)}): their ordering there is itself "
                f"not established, so agreeing with it says little."
            )
        lines += ["", text(said)]
        if found.fixed and len(found.fixed) == len(found.sizes + [found.largest]) * found.sizes[0].arms:
            lines += [
                "",
                "Every arm has one seed with a result at every size: each draw is the means themselves, and the "
                "intervals say nothing of the seeds' noise.",
            ]
        elif found.fixed:
            lines += ["", text(f"One seed with a result, fixed in every draw: {'; '.join(found.fixed)}.")]
    lines += [
        "",
        "## Held-out size",
        "",
        f"Each arm's curve fitted on its sizes but its largest predicts {m} at the largest size's compute. The form "
        f"is the report's where the sizes left allow it, else a·C^-b (3 or more sizes), else the line through 2 "
        f"sizes in log-log. The 95% interval is the percentile interval over {RESAMPLES} draws of the seeds within "
        f"each fitted size, refitted: it holds the seeds' noise, not the doubt about the form.",
        "",
        f"| arm | {k} held out | fit | predicted [95% CI] | observed | observed / predicted − 1 | inside |",
        "|---|---|---|---|---|---|---|",
    ]
    for pred in found.predictions:
        if pred.predicted is None:
            lines.append(
                f"| {text(names.get(pred.arm, pred.arm))} | {code(pred.size)} | – | {text(pred.note)} | – | – | – |"
            )
            continue
        interval = f" [{pred.low:.4f}, {pred.high:.4f}]" if pred.low is not None else f" ({text(pred.note)})"
        observed = "–" if pred.observed is None else f"{pred.observed:.4f}"
        error = "–" if pred.error is None else f"{100 * pred.error:+.1f}%"
        inside = "–" if pred.inside is None else ("yes" if pred.inside else "no")
        lines.append(
            f"| {text(names.get(pred.arm, pred.arm))} | {code(pred.size)} | {text(pred.form)} | {pred.predicted:.4f}{interval} | "
            f"{observed} | {error} | {inside} |"
        )
    return lines


def change_lines(found: Changes | None, metric: str, key: str) -> list[str]:
    """The section on how each arm's difference to the baseline changes with size
    (`zoo.compare.interaction`)."""
    if found is None:
        return []
    m = text(metric)
    rows = []
    for c in found.rows:
        d = c.change
        adjusted = "–" if d.adj_low is None else f"[{d.adj_low:+.4f}, {d.adj_high:+.4f}]"
        rows.append(
            f"| {text(c.arm)} | {code(c.size)} | {c.small:+.4f} | {code(c.largest)} | {c.large:+.4f} | {d} | "
            f"{adjusted} | {d.p_text()} |"
        )
    return [
        "",
        "## Does each difference change with size",
        "",
        f"Each arm's difference to the baseline in {m} (mean over seeds of arm − baseline, paired by seed "
        f"where both ran the same seeds) at each smaller size and at the largest size both reached, and the "
        f"change between them: (difference at the largest) − (difference at the smaller). The two sizes' runs "
        f"are separate and taken as independent (the same seed at two sizes shares its data order; a correlation "
        f"between the sizes would make this interval too wide if positive, too narrow if negative), so the "
        f"change's 95% interval is Welch's (Welch–Satterthwaite degrees of freedom). An "
        f"adjusted interval that excludes 0 says the difference is not the same at both sizes; one that spans 0 "
        f"says the design cannot tell, not that it is the same.",
        "",
        text(found.family.sentence()),
        "",
        f"| arm | smaller {text(key)} | difference there | largest | difference there | change [95% CI] | "
        f"adjusted | p |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]
