"""Arms compared across model sizes (`zoo-compare SWEEP... scale=model.d_model`): does a change
keep paying as the model grows, and what is it worth in training compute?

A size is one value of KEY. An arm is every run with the same config except the seed, KEY, the
keys that change with KEY alone (a size that sets width, depth and training steps together is
one size) and, with `tune=KEY2`, KEY2: then each arm at each size is taken at its own best KEY2,
each seed measured at the value chosen on the other seeds (`zoo.compare.select`); a KEY2 value at
which any run of that size ended without a final result is failed for tuning there (never
chosen, never averaged over the seeds that finished).

For each arm and size: the training compute C = 3 · F · D (F the summary's forward FLOPs per
token, D the tokens seen; backward ≈ 2 × forward), the final metric (mean ± std over seeds),
and the accounting a reviewer asks for: N (non-embedding parameters), D, D/N and the epochs
over the training split. Each arm gets a power law L = a · C^-b (+ e, the irreducible loss, from
MIN_POINTS_IRREDUCIBLE sizes on) with its residuals, its fit error and a 95% interval for b that
is the wider of two: the seed bootstrap (seeds resampled within each size, refitted) and the
fit's own misfit (b ± t · se_b on n - parameters degrees of freedom). A fit through 3 sizes
has 1 residual degree of freedom and is called descriptive. The bootstrap is this module's, not
`scipy.stats.bootstrap`: its interval takes the outer order statistics of the refitted exponents
(`zoo.compare.multipliers`) where SciPy's percentile interval interpolates between them, and a resample the
form cannot fit is left out as undefined where SciPy's would make the whole interval NaN.

The compute multiplier of an arm at a size (`zoo.compare.multipliers.multiplier`) is the compute the baseline needs to
reach the arm's measured loss there, divided by the arm's compute there. The baseline's curve
at that size is its fitted power law moved to pass through its own measured loss at that size
(the fit gives the exchange rate between loss and compute, the measurement the level):

    M = (C_base / C_arm) · ((L_base - e) / (L_arm - e))^(1/b)

so an arm measured worse than the baseline at equal compute always gets M < 1, and a better one
M > 1, whatever the fits miss. Its 95% interval is the range of M over two 97.5% intervals taken
together (Bonferroni: both hold at once at least 95% of the time): the Student-t interval of the
difference in log(L - e) between the arms' seeds at that size (paired when they ran the same
seeds) and the interval of the baseline's exponent (the wider of seed bootstrap and misfit).
A bootstrap of 2 or 3 seeds is far too narrow for this (2 seeds give 3 possible means), and at
equal compute this interval spans 1 exactly when the loss difference's spans 0.
Too few sizes for a fit: said, never faked. equivalence=, threshold= and last_k= read each arm at
each size (`zoo.compare.scaled_options`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zoo.compare import scaled_options as options
from zoo.compare.decisions_plot import plot_decisions
from zoo.compare.design import held_settings
from zoo.compare.errors import CompareError
from zoo.compare.interaction import Changes, changes
from zoo.compare.joint import edge_clause, joined
from zoo.compare.markdown.scaled import write_scaled_markdown
from zoo.compare.multipliers import LEVEL, family_box, fit_arms
from zoo.compare.noise import LAST_K, ArmNoise, Attribution
from zoo.compare.plots import plot_scaling
from zoo.compare.powerlaw import MIN_POINTS_IRREDUCIBLE
from zoo.compare.report import (
    load_runs,
    make_out,
    pick_baseline,
    status_of,
    write_csv,
)
from zoo.compare.runs import Run
from zoo.compare.scaled_arms import ScaledArm, scale_arms
from zoo.compare.scaled_options import SizeReading
from zoo.compare.table import swept, write_heldout, write_runs
from zoo.compare.threshold import Reach
from zoo.compare.transfer import AGREE, Decisions, decide, write_decisions
from zoo.compare.tune import _order, heldout_rows
from zoo.compare.verdict import Family, few_seeds_lead, label, lower_is_better

DESCRIPTIVE_SIZES = 3  # a fit through this many sizes or fewer describes them; it does not predict
DN_SPREAD = 1.1  # D/N of an arm's sizes differing by more than this factor is said


@dataclass
class ScaleReport:
    metric: str
    key: str
    arms: list[ScaledArm]
    baseline: ScaledArm
    keys: list[str]  # settings that differ between arms
    linked: list[str]  # keys that change with KEY (part of a size)
    irreducible: bool
    tune: str | None = None  # KEY2 of tune=, chosen per arm and size
    files: dict[str, Path] = field(default_factory=dict)
    unreadable: list[Run] = field(default_factory=list)

    notes: list[str] = field(default_factory=list)  # what the data left out, said once each
    family: int = 0  # the multipliers with an interval: one family, adjusted together
    # decisions across sizes: decision accuracy, rank correlation, held-out size (zoo.compare.transfer)
    decisions: Decisions | None = None
    changes: Changes | None = None  # how each arm's difference to the baseline changes with size
    # equivalence=, threshold= and the noise beyond seeds at each size (zoo.compare.scaled_options)
    margin: float | None = None
    equivalent: list[SizeReading] = field(default_factory=list)
    equivalence_family: Family | None = None
    target: float | None = None
    reach: list[Reach] = field(default_factory=list)
    last_k: int = LAST_K
    noise: list[ArmNoise] = field(default_factory=list)
    parts: list[Attribution | str] = field(default_factory=list)

    def family_sentence(self) -> str:
        """The report's declaration of its family of comparisons: the multipliers."""
        left = [
            f"{a.name} at {self.key}={m.size} ({m.note})"
            for a in self.arms
            for m in a.multipliers
            if m.low is None and m.note
        ]
        if self.family == 0:
            text = "Multiplicity: no compute multiplier has an interval, so nothing is adjusted."
        elif self.family == 1:
            text = (
                "Multiplicity: the family is the one compute multiplier with an interval; nothing is adjusted "
                "(its interval is at 95%)."
            )
        else:
            text = (
                f"Multiplicity: one family of {self.family} comparisons, every compute multiplier with an "
                f"interval (each arm other than the baseline at each of its sizes). Each multiplier's interval "
                f"is at the {100 * (1 - (1 - LEVEL) / self.family):.2f}% level (its two parts at "
                f"{100 * family_box(self.family):.2f}%): Bonferroni, so all {self.family} hold together with "
                f"at least 95% probability (Holm's step-down needs a p-value, which a range of multipliers "
                f"does not have). The exponent intervals describe each arm's own fit and are not in the family."
            )
        if left:
            text += " Left out of the family (no interval): " + "; ".join(left) + "."
        return text

    def verdict(self) -> str:
        """The opening sentence: at the largest size every arm reached, which arm has the best
        measured metric, and its multiplier against the baseline with its adjusted interval."""
        lower = lower_is_better(self.metric)
        common = None
        for arm in self.arms:
            values = {repr(s.value): s.value for s in arm.scored}
            common = values if common is None else {k: v for k, v in common.items() if k in values}
        if not common or len(self.arms) < 2:
            return "Verdict: no size has a result for every arm; there is nothing to compare."
        largest = max(common.values(), key=_order)
        at = {a.name: next(s for s in a.scored if repr(s.value) == repr(largest)) for a in self.arms}
        best = (min if lower else max)(self.arms, key=lambda a: at[a.name].result[1])
        where = f"{self.key}={largest}"
        few = few_seeds_lead(self.arms, {a.name: len(at[a.name].finals) for a in self.arms})
        lead = (
            f"Verdict: {few}at the largest size every arm reached ({where}), {label(best)} has the "
            f"{'lowest' if lower else 'highest'} mean {self.metric} ({at[best.name].mean:.4f})."
        )
        if best is self.baseline:
            undecided = [a for a in self.arms if a is not best and not _decided(a, largest, "costs compute")]
            if not undecided:
                return lead + " Every other arm's compute multiplier there is below 1 with its adjusted interval."
            return (
                lead
                + " The data cannot tell it from "
                + ", ".join(label(a) for a in undecided)
                + ": their multipliers' adjusted intervals there span 1 or are missing."
            )
        m = next((x for x in best.multipliers if repr(x.size) == repr(largest)), None)
        if m is None or m.value is None:
            return lead + " It has no compute multiplier against the baseline there."
        if m.low is None:
            return lead + f" Its compute multiplier against the baseline there is {m}: the data cannot tell."
        sure = (
            "the adjusted interval is above 1: it saves compute"
            if m.low > 1
            else "the adjusted interval spans 1: the data cannot tell it from the baseline"
        )
        others = "" if len(self.arms) == 2 else " It is compared with the baseline only."
        return lead + f" Its compute multiplier against the baseline there is {m}; {sure}.{others}"

    @property
    def warnings(self) -> list[str]:
        return self.notes + [f"{arm.name}: no power law: {arm.no_fit}" for arm in self.arms if arm.no_fit]

    def rows(self) -> list[dict]:
        out = []
        for arm in self.arms:
            by_size = {repr(m.size): m for m in arm.multipliers}
            for size in arm.sizes:
                m = by_size.get(repr(size.value))
                row: dict[str, Any] = {"arm": arm.name + (" (baseline)" if arm is self.baseline else "")}
                row.update({k: arm.settings.get(k, "") for k in self.keys})
                row[self.key] = size.value
                if self.tune:
                    row[f"best {self.tune}"] = size.tuned
                row.update(
                    {
                        "compute": size.compute,
                        f"{self.metric} mean": size.mean,
                        f"{self.metric} std": size.std,
                        "seeds": len(size.finals),
                        "N": size.params,
                        "N total": size.total_params,
                        "D": size.tokens,
                        "D/N": size.tokens_per_param,
                        "epochs": size.epochs,
                        "fit": str(arm.fit) if arm.fit else arm.no_fit,
                        "residual": size.residual,
                        "rmse_log": arm.fit.rmse_log if arm.fit else None,
                        "fit_df": arm.fit.df if arm.fit else None,
                        "exponent": arm.fit.b if arm.fit else None,
                        "exponent_low": arm.exponent_low,
                        "exponent_high": arm.exponent_high,
                        "exponent_seed_low": arm.seed_interval[0] if arm.seed_interval else None,
                        "exponent_seed_high": arm.seed_interval[1] if arm.seed_interval else None,
                        "exponent_fit_low": arm.fit_interval[0] if arm.fit_interval else None,
                        "exponent_fit_high": arm.fit_interval[1] if arm.fit_interval else None,
                        "multiplier": m.value if m else None,
                        "multiplier_low": m.low if m else None,
                        "multiplier_high": m.high if m else None,
                    }
                )
                row.update(options.columns(self, arm, size))
                out.append(row)
        return out


def compare_scaled(
    dirs: list[Path],
    out: Path,
    *,
    key: str,
    metric: str = "val/loss",
    baseline: str | None = None,
    plots: bool = True,
    irreducible: bool | None = None,
    tune: str | None = None,
    found: tuple[list[Run], list[Run]] | None = None,
    linked: list[str] | None = None,
    agree: float | None = None,
    equivalence: float | None = None,
    threshold: float | None = None,
    last_k: int = LAST_K,
) -> ScaleReport:
    """Read the sweeps in `dirs`, compare the arms across the sizes of `key` (each at its own best
    `tune` value when given), write report.md, report.csv (and scaling.png) into `out`, and
    return the report. `irreducible`: fit e + a·C^-b (None: when every arm has at least
    MIN_POINTS_IRREDUCIBLE sizes). Also writes runs.csv and, with tune=, heldout.csv; `found`: runs
    and runs left out already read, instead of `dirs`'; `linked`: keys said to change with `key`
    that the runs do not hold (a report rebuilt from runs.csv: comparison.json's). `agree`: the
    rate at which a smaller size's decisions agree with the largest's (`zoo.compare.transfer`;
    given, a design the bootstrap cannot take is refused; None: AGREE, and it is said).
    `equivalence`, `threshold`, `last_k`: a plain report's, read at each size
    (`zoo.compare.scaled_options`)."""
    if metric.rsplit("/", 1)[-1] not in ("loss", "ppl", "bpb"):
        raise CompareError(
            f"metric={metric}: scale= fits a loss falling with compute; use val/loss, val/bpb or val/ppl"
        )
    runs, unreadable = found if found is not None else load_runs(dirs, metric)
    if tune:
        runs = joined(runs, tune)  # tune=KEY1,KEY2: one key whose values are the combinations
    _one_size(runs, key)
    arms, keys, changing = scale_arms(runs, key, metric, tune)
    linked = list(dict.fromkeys([*changing, *(linked or [])]))
    base = pick_baseline(arms, baseline)
    if irreducible is None:
        irreducible = all(len(a.scored) >= MIN_POINTS_IRREDUCIBLE for a in arms)
    family = fit_arms(arms, base, irreducible)
    report = ScaleReport(
        family=family,
        metric=metric,
        key=key,
        arms=arms,
        baseline=base,
        keys=keys,
        linked=linked,
        irreducible=irreducible,
        tune=tune,
        unreadable=unreadable,
        notes=_gaps(arms, base, key, linked) + _design_warnings(arms, key, tune),
    )
    report.decisions = decide(arms, key, irreducible=irreducible, rate=agree or AGREE, strict=agree is not None)
    if report.decisions.note:
        report.notes.append(f"no decision accuracy across sizes: {report.decisions.note}")
    report.changes = changes(arms, base, key)
    tails = options.read_options(report, equivalence, threshold, last_k, files=found is None)
    make_out(out)
    report.files["csv"] = write_csv(report, out / "report.csv")
    report.files.update(
        write_runs(
            report,
            out,
            kind="scaled",
            scale=key,
            tune=tune,
            irreducible=irreducible,
            held=held_settings(report.arms, tune),
            linked=linked,
            agree=agree,
            tails=tails,
            extra={"equivalence": equivalence, "threshold": threshold, "last_k": last_k if tails else None},
        )
    )
    report.files.update(write_decisions(report.decisions, out))
    if tune:
        report.files["heldout_csv"] = write_heldout(heldout_rows(arms, tune, metric, size_key=key), out)
    if plots:
        report.files["scaling"] = plot_scaling(report, out / "scaling.png")
        decisions_png = plot_decisions(report.decisions, out / "decisions.png")
        if decisions_png is not None:
            report.files["decisions"] = decisions_png
    report.files["md"] = write_scaled_markdown(report, out / "report.md", swept(report))
    return report


def _one_size(runs: list[Run], key: str) -> None:
    """Refuse runs that hold one value of `key`: nothing to fit, no decision to carry across."""
    values = {repr(r.config.get(key)): r.config.get(key) for r in runs if key in r.config}
    if len(values) == 1:
        (value,) = values.values()
        raise CompareError(
            f"scale={key}: every run has {key}={value}, one size; a comparison across sizes needs 2 or more "
            f"(compare one size without scale=)"
        )


def _gaps(arms: list[ScaledArm], baseline: ScaledArm, key: str, linked: list[str]) -> list[str]:
    """What the comparison cannot use, said rather than dropped: a size whose runs all ended
    without a finite metric or compute, a baseline with no result, an arm with one size."""
    notes = []
    for arm in arms:
        for size in arm.sizes:
            if size.mean is None:
                notes.append(
                    f"{arm.name} at {key}={size.value}: no finished run with a finite metric and "
                    f"compute ({status_of(size.runs)}); left out of its fit"
                )
    if not baseline.scored:
        notes.append(f"the baseline ({baseline.name}) has no result at any size: no multipliers")
    if arms and all(len({repr(s.value) for s in a.sizes}) <= 1 for a in arms):
        hint = f" (keys taken as part of a size: {', '.join(linked)})" if linked else ""
        notes.append(
            f"every arm has one size of {key}: a key that changes with both the arm and the size splits arms{hint}"
        )
    return notes


def _design_warnings(arms: list[ScaledArm], key: str, tune: str | None) -> list[str]:
    """What makes the comparison weaker than it looks, said once each: fits through 3 sizes or
    fewer, 2 seeds, sizes that repeat data or train on different D/N, tuning without hold-out."""
    out = []
    fitted = [a for a in arms if a.fit is not None]
    few = sorted({len(a.scored) for a in fitted})
    if few and min(few) <= DESCRIPTIVE_SIZES:
        df = min(a.fit.df for a in fitted if a.fit is not None)
        out.append(
            f"the fits go through {min(few)} sizes ({df} residual degree{'s' if df != 1 else ''} of freedom): "
            f"they are descriptive, not laws to extrapolate; exponent intervals include the fit's misfit"
        )
    seeds = sorted({len(s.finals) for a in arms for s in a.scored})
    if seeds and seeds[0] == 2:
        out.append("some sizes rest on 2 seeds (1 degree of freedom): their spread is a guess; run 3 or more")
    for arm in arms:
        for s in arm.scored:
            if s.epochs is not None and s.epochs > 1.0:
                out.append(
                    f"{arm.name} at {key}={s.value} reads its training split {s.epochs:.2f} times: "
                    f"the later passes repeat data (fewer steps or a larger corpus avoid it)"
                )
        ratios = [s.tokens_per_param for s in arm.scored if s.tokens_per_param]
        if len(ratios) > 1 and max(ratios) > DN_SPREAD * min(ratios):
            out.append(
                f"{arm.name}: tokens per parameter differ across sizes ({', '.join(f'{r:.1f}' for r in ratios)}): "
                f"the sizes are not trained alike, which the curve absorbs"
            )
    scored = [s for a in arms for s in a.scored]
    if scored and all(s.epochs is None for s in scored):
        out.append("the runs do not record their training split's size: epochs are not known")
    if tune and any(not s.held_out for a in arms for s in a.scored):
        out.append(
            f"some sizes ran one seed: their best {tune} was chosen and measured on that seed "
            f"(winner's curse: optimistic)"
        )
    for arm in arms:
        for s in arm.sizes:
            if s.choice is None:
                continue
            for i in s.choice.failed:
                out.append(
                    f"{arm.name} at {key}={s.value}: {tune}={s.points[i].value} is failed for tuning (a run "
                    f"there ended without a final result); never chosen, never averaged over the seeds "
                    f"that finished"
                )
            edge = edge_clause(tune, [p.value for p in s.points], s.tuned) if tune and s.tuned is not None else None
            if edge:
                out.append(f"{arm.name} at {key}={s.value}: {edge}; the best may lie beyond the grid")
            if s.choice.unmeasured:
                out.append(
                    f"{arm.name} at {key}={s.value}: seed(s) {', '.join(map(str, s.choice.unmeasured))} have "
                    f"no run at the {tune} the other seeds chose: not measured"
                )
        for s in arm.scored:
            if len(s.finals) < 2:
                out.append(
                    f"{arm.name} at {key}={s.value}: fewer than 2 seeds with a result: no spread, and its "
                    f"multiplier has no interval"
                )
            elif all(v == s.finals[0] for v in s.finals):
                out.append(f"{arm.name} at {key}={s.value}: zero spread over its seeds: its multiplier has no interval")
    return out


def _decided(arm: ScaledArm, size: Any, verdict: str) -> bool:
    m = next((x for x in arm.multipliers if repr(x.size) == repr(size)), None)
    return m is not None and m.verdict == verdict
