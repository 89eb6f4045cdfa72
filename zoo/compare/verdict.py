"""One multiplicity family per report, the pairs between all arms, and the verdict a report
opens with.

A report makes several comparisons at once (each arm against the baseline, or with `pairs=all`
every pair of arms); each is one test of a family, and the family's chance of any false finding
is held at 5%: Holm's step-down adjusts the p-values (Holm 1979), and each difference also gets
an adjusted interval at the 1 − 0.05/m level (Bonferroni: all m intervals hold together with at
least 95% probability; Holm's procedure has no intervals of its own). A difference without a
test (zero spread over its seeds, or fewer than 2 seeds on a side) is left out of the family and
the report says so: an arm identical to the baseline tests nothing. The adjusted intervals use
SciPy's t quantile (`zoo.compare.stats.t_quantile`).

The verdict names the arm with the best mean on the metric, by how much it leads the arms it is
compared with, and whether the adjusted intervals exclude zero; when one spans zero (or has no
interval) the data cannot tell those arms apart, and the verdict says that instead: it never reads
such an interval as "no difference" (equivalence within a margin is `zoo.compare.equivalence`).
A verdict whose arms have fewer than 3 seeds says so in its first sentence. Throughput (tokens/s)
is flagged when it varies within an arm comparably to between arms (`load_flag`, its rule stated
there): then it measures the machine's load, not the arm."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from zoo.compare.errors import CompareError
from zoo.compare.escape import text
from zoo.compare.stats import ZERO_SPREAD, Difference, holm, mean_std, t_quantile
from zoo.config.facts.ffn import FFNKind, unread_keys

LEVEL = 0.95

# the last part of a metric's name -> whether a lower value is better
DIRECTION = {
    "loss": True,
    "ppl": True,
    "bpb": True,
    "accuracy": False,
    "bleu": False,
    "exact_match": False,
    # lm-evaluation-harness task metrics (harness/TASK/METRIC: callbacks.downstream)
    "acc": False,
    "acc_norm": False,
    "perplexity": True,
    "word_perplexity": True,
    "byte_perplexity": True,
    "bits_per_byte": True,
    "f1": False,
    "mcc": False,
}
# the last part of a metric's name -> its unit, as axes and sentences say it
UNITS = {
    "loss": "nats per token",
    "bpb": "bits per byte",
    "ppl": "perplexity",
    "accuracy": "fraction correct",
    "acc": "fraction correct",
    "acc_norm": "fraction correct",
}


def direction(metric: str) -> bool | None:
    """True when a lower value of `metric` is better, False when higher, None when unknown."""
    return DIRECTION.get(metric.rsplit("/", 1)[-1])


def lower_is_better(metric: str) -> bool:
    """`direction`, for a comparison that must pick a best value (tune=, scale=): an unknown metric is refused."""
    name = metric.rsplit("/", 1)[-1]
    if name not in DIRECTION:
        raise CompareError(
            f"metric={metric}: tune= picks each arm's best value, and which way is better is "
            f"known for {', '.join(sorted(DIRECTION))} only"
        )
    return DIRECTION[name]


def unit(metric: str) -> str:
    """ "nats per token" for a loss, "bits per byte" for bpb, "" when not known."""
    return UNITS.get(metric.rsplit("/", 1)[-1], "")


def with_unit(metric: str) -> str:
    """ "val/loss (nats per token)": a metric named with its unit (axes' labels)."""
    u = unit(metric)
    return f"{metric} ({u})" if u and u != "perplexity" else metric


def adjusted_half(diff: Difference, m: int, level: float = LEVEL) -> float | None:
    """The half-width of `diff`'s interval at the 1 − (1 − level)/m level (its own is at `level`)."""
    if diff.low is None or diff.high is None or diff.df is None:
        return None
    half = (diff.high - diff.low) / 2
    if m <= 1:
        return half
    se = half / t_quantile(1 - (1 - level) / 2, diff.df)
    return se * t_quantile(1 - (1 - level) / (2 * m), diff.df)


@dataclass
class Family:
    """The comparisons a report adjusts together: `tested` (label, difference) with a test,
    `left_out` (label, why) without one; `what` says which comparisons they are."""

    what: str
    tested: list[tuple[str, Difference]] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)
    read_by: str = "the verdict"  # what reads the adjusted intervals ("": nothing the sentence names)

    @property
    def m(self) -> int:
        return len(self.tested)

    def sentence(self) -> str:
        """The report's declaration of its family: which comparisons, how adjusted, who is left out."""
        if self.m == 0:
            text = f"Multiplicity: the family is {self.what}; no comparison in it has a test, so nothing is adjusted."
        elif self.m == 1:
            text = (
                f"Multiplicity: the family is {self.what}: 1 comparison with a test, so nothing is adjusted "
                f"(its adjusted interval is its 95% interval)."
            )
        else:
            text = (
                f"Multiplicity: one family of {self.m} comparisons, {self.what}. Holm's step-down adjusts "
                f"their p-values (p (Holm)), and each adjusted interval is at the "
                f"{100 * (1 - (1 - LEVEL) / self.m):.2f}% level (Bonferroni: all {self.m} hold together with "
                f"at least 95% probability)"
                + (f"; {self.read_by} reads these adjusted intervals." if self.read_by else ".")
            )
        if self.left_out:
            text += (
                " Left out of the family (no test): "
                + "; ".join(f"{name} ({why})" for name, why in self.left_out)
                + "."
            )
        return text


def adjust(what: str, diffs: Sequence[tuple[str, Difference | None]]) -> Family:
    """The family of `diffs`: Holm's p-values and the adjusted interval set on each tested one."""
    family = Family(what)
    for name, diff in diffs:
        if diff is None:
            continue
        if diff.p is None:
            family.left_out.append((name, _why(diff)))
        else:
            family.tested.append((name, diff))
    holm([d for _, d in family.tested])
    for _, diff in family.tested:
        half = adjusted_half(diff, family.m)
        if half is not None:
            diff.adj_low, diff.adj_high = diff.mean - half, diff.mean + half
    return family


def _why(diff: Difference) -> str:
    if diff.flag == ZERO_SPREAD:
        return "zero spread: its seeds' differences do not vary (an arm identical to the other tests nothing)"
    return diff.flag or diff.method


@dataclass
class Pair:
    """`arm` − `other` on the report's metric."""

    arm: Any
    other: Any
    diff: Difference | None


def pairs_of(arms: Sequence[Any], baseline: Any, values, compare) -> list[Pair]:
    """Every pair of `arms` (later − earlier; against the baseline, arm − baseline, the
    difference the report already holds in `arm.diff`): `values(arm)` gives {seed: value},
    `compare(a, b)` the difference of two such maps."""
    out = []
    for j, arm in enumerate(arms):
        for other in arms[:j]:
            if other is baseline:
                out.append(Pair(arm, other, arm.diff))
            elif arm is baseline:
                out.append(Pair(other, arm, other.diff))
            else:
                a, b = values(arm), values(other)
                out.append(Pair(arm, other, compare(a, b) if a and b else None))
    return out


def named_settings(arm: Any) -> dict[str, str]:
    """The settings an arm is named by: its differing keys less those its feed-forward kind
    reads nothing of (a dense arm beside mixtures is not named by model.moe_top_k=2, a default
    it never reads: `zoo.config.facts.ffn.FFNFacts.keys`)."""
    settings = getattr(arm, "settings", {})
    runs = getattr(arm, "runs", None)
    value = runs[0].config.get("model.ffn") if runs else None
    kind = getattr(value, "value", value)  # a Choice, or the string a config file holds
    if kind not in {k.value for k in FFNKind}:
        return dict(settings)  # no kind recorded (every arm shares one) or one unknown here: every key
    unread = unread_keys(FFNKind(kind))
    return {k: v for k, v in settings.items() if k not in unread}


def label(arm: Any) -> str:
    """An arm named by its change ("model.norm=post"), its number when nothing differs."""
    settings = ", ".join(f"{k}={v}" for k, v in named_settings(arm).items())
    return f"{arm.name} ({settings})" if settings else arm.name


def _amount(value: float, metric: str) -> str:
    u = unit(metric)
    return f"{value:.4f}" + (f" {u}" if u and u != "perplexity" else "")


def verdict(
    arms: Sequence[Any],
    means: dict,
    baseline: Any,
    metric: str,
    *,
    pairs: list[Pair] | None = None,
    what: str = "mean final",
    seeds: dict[str, int] | None = None,
) -> str:
    """One or two sentences: which arm is best on `metric` (by its mean in `means`, {arm name:
    value}), by how much and how sure from the adjusted intervals, or that the data cannot tell.
    Each arm's `diff` is its difference to the baseline; `pairs` (pairs=all) the rest. `seeds`
    ({arm name: seeds behind its mean}): an arm on fewer than `FEW_SEEDS` is named in the first
    sentence (`few_seeds_lead`), not only in a table mark."""
    better = direction(metric)
    scored = [a for a in arms if means.get(a.name) is not None and math.isfinite(means[a.name])]
    if len(scored) < 2:
        return f"Verdict: fewer than two arms have a {what} {metric}; there is nothing to compare."
    if better is None:
        return (
            f"Verdict: which way is better for {metric} is not known (known for "
            f"{', '.join(sorted(DIRECTION))}), so no arm is called best; the table gives the differences."
        )
    best = (min if better else max)(scored, key=lambda a: means[a.name])
    word = "lowest" if better else "highest"
    rivals: list[tuple[Any, Difference | None]] = []  # (other arm, best − other)
    for other in scored:
        if other is best:
            continue
        diff = _between(best, other, baseline, pairs)
        if diff is not None or other is baseline or best is baseline or pairs is not None:
            rivals.append((other, diff))
    lead = (
        f"Verdict: {few_seeds_lead(scored, seeds)}{label(best)} has the {word} {what} {metric} ({means[best.name]:.4f})"
    )
    if not rivals:
        return lead + "; it is not compared with any other arm here (pairs=all compares every pair)."
    told: list[tuple[Any, Difference | None]] = []
    untold: list[tuple[Any, Difference | None]] = []
    for other, diff in rivals:
        ok = (
            diff is not None
            and diff.adj_low is not None
            and diff.adj_high is not None
            and (diff.adj_high < 0 if better else diff.adj_low > 0)
        )
        (told if ok else untold).append((other, diff))
    closest = min(rivals, key=lambda r: abs(means[r[0].name] - means[best.name]))
    gap = abs(means[closest[0].name] - means[best.name])
    rival = label(closest[0]) + (" (the baseline)" if closest[0] is baseline else "")
    lead += f", {_amount(gap, metric)} {'below' if better else 'above'} {rival}"
    cdiff = closest[1]
    if cdiff is not None and cdiff.adj_low is not None:
        lead += f" (adjusted 95% interval of the difference [{cdiff.adj_low:+.4f}, {cdiff.adj_high:+.4f}])"
    scope = "every other arm" if pairs is not None or best is baseline or len(scored) == 2 else "the baseline"
    if not untold:
        thin = " on these few seeds" if few_seeds_lead(scored, seeds) else ""
        text = lead + f". The adjusted intervals against {scope} exclude zero: the data favour it{thin}."
    else:
        names = ", ".join(
            label(o) + ("" if d is None or d.adj_low is not None else f" ({d.flag or 'no interval'})")
            for o, d in untold
        )
        text = (
            lead
            + f". The data cannot tell it from {names}: "
            + (
                "the adjusted interval spans zero or is missing."
                if len(untold) == 1
                else "their adjusted intervals span zero or are missing."
            )
        )
    if pairs is None and best is not baseline and len(scored) > 2:
        text += " It is compared with the baseline only; pairs=all compares every pair."
    return text


FEW_SEEDS = 3  # fewer seeds than this on an arm: its verdict says so first


def few_seeds_lead(arms: Sequence[Any], seeds: dict[str, int] | None) -> str:
    """ "on fewer than 3 seeds (arm 0: 2, arm 1: 2; a two-sample test then rests on at most 1 degree
    of freedom per arm, too few to trust its interval), ": the opening of a verdict whose
    arms have fewer than FEW_SEEDS seeds; "" when every arm has enough (or `seeds` is not given)."""
    if not seeds:
        return ""
    few = [(a, seeds.get(a.name, 0)) for a in arms if seeds.get(a.name, 0) < FEW_SEEDS]
    if not few:
        return ""
    counts = ", ".join(f"{a.name}: {n}" for a, n in few)
    return (
        f"on fewer than {FEW_SEEDS} seeds ({counts}; a two-sample test then rests on at most 1 degree of "
        f"freedom per arm, too few to trust its interval), "
    )


def _between(best: Any, other: Any, baseline: Any, pairs: list[Pair] | None) -> Difference | None:
    """best − other, from the arm-vs-baseline differences or `pairs`; None when not compared."""

    def flipped(d: Difference | None) -> Difference | None:
        if d is None:
            return None
        out = Difference(
            -d.mean,
            None if d.high is None else -d.high,
            None if d.low is None else -d.low,
            d.method,
            df=d.df,
            p=d.p,
            p_holm=d.p_holm,
            flag=d.flag,
        )
        if d.adj_low is not None and d.adj_high is not None:  # set together by `adjust`
            out.adj_low, out.adj_high = -d.adj_high, -d.adj_low
        return out

    if other is baseline:
        return best.diff
    if best is baseline:
        return flipped(other.diff)
    for pair in pairs or []:
        if pair.arm is best and pair.other is other:
            return pair.diff
        if pair.arm is other and pair.other is best:
            return flipped(pair.diff)
    return None


def pair_lines(pairs: list[Pair], metric: str) -> list[str]:
    """The report's "Every pair" table (markdown, what runs wrote escaped)."""
    if not pairs:
        return []
    lines = [
        "",
        "## Every pair",
        "",
        f"Δ = arm − other on {text(metric)}, with its 95% interval, its adjusted interval (within the family "
        f"declared above) and the p-value of no difference (Holm-adjusted in brackets).",
        "",
        "| arm | other | Δ [95% CI] | adjusted interval | p (Holm) |",
        "|---|---|---|---|---|",
    ]
    for pair in pairs:
        d = pair.diff
        adj = "–" if d is None or d.adj_low is None else f"[{d.adj_low:+.4f}, {d.adj_high:+.4f}]"
        lines.append(
            f"| {text(label(pair.arm))} | {text(label(pair.other))} | {d if d is not None else '–'} | "
            f"{adj} | {d.p_text() if d is not None else '–'} |"
        )
    return lines


def pair_rows(pairs: list[Pair]) -> list[dict]:
    """pairs.csv: one row per pair."""
    out = []
    for pair in pairs:
        d = pair.diff
        out.append(
            {
                "arm": pair.arm.name,
                "other": pair.other.name,
                "diff": d.mean if d else None,
                "ci_low": d.low if d else None,
                "ci_high": d.high if d else None,
                "adj_low": d.adj_low if d else None,
                "adj_high": d.adj_high if d else None,
                "df": d.df if d else None,
                "p": d.p if d else None,
                "p_holm": d.p_holm if d else None,
                "flag": d.flag if d else "",
            }
        )
    return out


LOAD_RATIO = 0.5  # the load flag fires when the within-arm spread is at least this fraction of the between-arm one


def load_flag(per_arm: Sequence[Sequence[float]]) -> str:
    """A warning when tokens/s varies within an arm comparably to between arms: the largest
    standard deviation over an arm's seeds is at least LOAD_RATIO (half) of the standard deviation
    of the arms' means, i.e. the arms' speeds are not separated by more than twice the noise of one
    arm's runs (with no true difference the arms' means would spread by within/√seeds, so a
    between-arm spread under twice the within-arm one cannot be told from the machine's load). ""
    otherwise or when unknown (fewer than 2 arms, or no arm with 2 runs)."""
    arms = [list(v) for v in per_arm if v]
    if len(arms) < 2 or all(len(v) < 2 for v in arms):
        return ""
    within = max(mean_std(v)[1] for v in arms if len(v) > 1)
    between = mean_std([sum(v) / len(v) for v in arms])[1]
    if within <= 0 or within < LOAD_RATIO * between:
        return ""
    spread = max(max(v) / min(v) for v in arms if min(v) > 0) if all(min(v) > 0 for v in arms) else float("nan")
    return (
        f"tokens/s varies within an arm comparably to between arms (standard deviation over one arm's seeds up "
        f"to {within:,.0f}, between the arms' means {between:,.0f}; the flag fires when the first is at least "
        f"half the second; up to {spread:.2g}× within an arm): it measures the machine's load during each run, "
        f"not the arm"
    )
