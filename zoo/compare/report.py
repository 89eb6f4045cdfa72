"""Runs -> arms -> the comparison table, written as report.md and report.csv (plots in
`zoo.compare.plots`).

An arm is every run with the same config except the seed. The table shows only the config keys
whose values differ between arms, the mean ± std over finished seeds of the final validation
metric, its difference to the baseline arm with a 95% interval, model size, FLOPs per token,
tokens seen, throughput, and how many seeds finished, failed or are unfinished: a run is never
dropped silently. With several arms against one baseline each difference also has its p-value
and Holm's adjusted p-value; an interval on one degree of freedom (2 seeds) is flagged, and a
difference with zero spread or fewer than 2 seeds on a side gets no interval and no p-value
(flagged on its row and in the warnings). The report opens with its verdict and declares its one
family of comparisons (`zoo.compare.verdict`); `pairs` adds every pair of arms. Beside report.csv,
runs.csv holds every run (`zoo.compare.table`), from which `zoo-compare recompute=DIR` rebuilds
the report. A loss per token is compared only between runs that share a tokenizer
(`check_tokenizers`); bits per byte (val/bpb) compares any."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from zoo.compare import equivalence as equiv
from zoo.compare import threshold as thresh
from zoo.compare.committed_lengths import place_lengths
from zoo.compare.design import _show, few_seed_warnings, flag_warnings, held_settings, repeat_warnings
from zoo.compare.errors import CompareError
from zoo.compare.escape import csv_cell
from zoo.compare.markdown.plain import write_lengths_csv, write_markdown
from zoo.compare.noise import LAST_K, ArmNoise, Attribution, arm_noise, attribute, tail_sd
from zoo.compare.patterns import arm_setting
from zoo.compare.plots import plot_curves, plot_final, plot_lengths
from zoo.compare.routing_plot import plot_routing
from zoo.compare.runs import NOT_SETTINGS, Run, RunStatus, find_runs, number
from zoo.compare.stats import Difference, difference, mean_std
from zoo.compare.table import swept, write_pair_rows, write_runs
from zoo.compare.verdict import Family, Pair, adjust, direction, label, load_flag, pairs_of
from zoo.config.records.atomic import replacing
from zoo.config.records.rundir import RunDir


@dataclass
class Arm:
    name: str  # "arm N"
    runs: list[Run]
    settings: dict[str, str] = field(default_factory=dict)  # the differing keys only
    diff: Difference | None = None

    def count(self, status: RunStatus) -> int:
        return sum(r.status == status for r in self.runs)

    def finals(self, metric: str) -> dict:
        """{seed: final value} of the finished runs that logged `metric`."""
        return {r.seed: r.final(metric) for r in self.runs if r.final(metric) is not None}

    def summary_mean(self, *keys: str) -> float | None:
        values = [v for v in (number(r, *keys) for r in self.runs) if v is not None]
        return sum(values) / len(values) if values else None

    @property
    def status(self) -> str:
        return status_of(self.runs)


@dataclass
class Report:
    metric: str
    arms: list[Arm]
    baseline: Arm
    keys: list[str]  # differing config keys, in config order
    files: dict[str, Path] = field(default_factory=dict)
    lengths: list[dict] = field(default_factory=list)  # zoo.compare.lengths.length_table rows
    multiples: list[int] = field(default_factory=list)
    unreadable: list[Run] = field(default_factory=list)  # damaged .hydra/: no config to place them by
    family: Family | None = None  # the comparisons adjusted together (zoo.compare.verdict)
    pairs: list[Pair] | None = None  # pairs=all: every pair of arms
    # equivalence=, threshold= and the noise beyond seeds (zoo.compare.equivalence, .threshold, .noise)
    margin: float | None = None
    equivalent: list[tuple[str, equiv.Equivalence]] = field(default_factory=list)  # each comparison of the family
    target: float | None = None
    reach: list[thresh.Reach] = field(default_factory=list)
    last_k: int = LAST_K
    noise: list[ArmNoise] = field(default_factory=list)
    parts: list[Attribution | str] = field(default_factory=list)

    @property
    def load(self) -> str:
        """Why tokens/s measures the machine, not the arm ("" when it does not)."""
        return load_flag(
            [
                [
                    v
                    for v in (number(r, "tokens_per_s") for r in a.runs if r.status == RunStatus.finished)
                    if v is not None
                ]
                for a in self.arms
            ]
        )

    @property
    def warnings(self) -> list[str]:
        runs = [r for a in self.arms for r in a.runs]
        diffs = [(arm.name, arm.diff) for arm in self.arms]
        return (
            repeat_warnings(runs) + few_seed_warnings(diffs) + flag_warnings(diffs) + ([self.load] if self.load else [])
        )

    def rows(self) -> list[dict]:
        out = []
        for arm in self.arms:
            finals = arm.finals(self.metric)
            mean, std = mean_std(list(finals.values())) if finals else (None, None)
            params = arm.summary_mean("model", "total_params")
            non_emb = arm.summary_mean("model", "non_embedding_params")
            active = arm.summary_mean("model", "active_non_embedding_params")  # a mixture's; absent for older runs
            row: dict[str, Any] = {"arm": arm.name + (" (baseline)" if arm is self.baseline else "")}
            row.update({k: arm.settings.get(k, "") for k in self.keys})
            row.update(
                {
                    f"{self.metric} mean": mean,
                    f"{self.metric} std": std,
                    "seeds": len(finals),
                    "diff": arm.diff.mean if arm.diff else None,
                    "ci_low": arm.diff.low if arm.diff else None,
                    "ci_high": arm.diff.high if arm.diff else None,
                    "df": arm.diff.df if arm.diff else None,
                    "p": arm.diff.p if arm.diff else None,
                    "p_holm": arm.diff.p_holm if arm.diff else None,
                    "adj_low": arm.diff.adj_low if arm.diff else None,
                    "adj_high": arm.diff.adj_high if arm.diff else None,
                    "flag": arm.diff.flag if arm.diff else "",
                    "params": params,
                    "non_embedding_params": non_emb,
                    "active_non_embedding_params": active if active else non_emb,
                    "flops_per_token": arm.summary_mean("model", "flops_per_token"),
                    "tokens_seen": arm.summary_mean("tokens_seen"),
                    "tokens_per_s": arm.summary_mean("tokens_per_s"),
                    "wall_seconds": arm.summary_mean("wall_seconds"),
                    "status": arm.status,
                }
            )
            row.update(self.option_columns(arm))
            out.append(row)
        return out

    def option_columns(self, arm: Arm) -> dict[str, Any]:
        """report.csv's columns of equivalence= and threshold=, where given."""
        return option_columns(self, arm)


def option_columns(report: Any, arm: Any) -> dict[str, Any]:
    """report.csv's columns of equivalence= and threshold= for `arm` of `report` (a Report or a
    zoo.compare.tune.TunedReport: each arm's `diff` against the baseline, the family's m)."""
    row: dict[str, Any] = {}
    if report.margin is not None:
        m = report.family.m if report.family else 1
        mine = None if arm is report.baseline else equiv.tost(arm.diff, report.margin, m)
        row.update(equiv.columns(mine))
    if report.target is not None:
        row.update(thresh.columns(next((r for r in report.reach if r.name == arm.name), None)))
    return row


def group_arms(runs: list[Run]) -> tuple[list[Arm], list[str]]:
    """Arms in order of first appearance, and the config keys that differ between them."""
    by_key: dict[tuple, list[Run]] = {}
    for run in runs:
        by_key.setdefault(run.arm_key, []).append(run)
    arms = [Arm(name=f"arm {i}", runs=group) for i, group in enumerate(by_key.values())]
    all_keys: list[str] = []
    for run in runs:
        all_keys += [k for k in run.config if k not in all_keys]
    keys = []
    for key in all_keys:
        values = {repr(arm.runs[0].config.get(key)) for arm in arms}
        if len(values) > 1 and not key.startswith(NOT_SETTINGS):
            keys.append(key)
    for arm in arms:
        arm.settings = {k: arm_setting(arm.runs[0].config, k) for k in keys}
    return arms, keys


def status_of(runs: list[Run]) -> str:
    """How many of `runs` finished, failed, ... e.g. "2 finished, 1 failed"."""
    counts = {s: sum(r.status == s for r in runs) for s in RunStatus}
    return ", ".join(f"{n} {s.value}" for s, n in counts.items() if n)


def _same(value, written: str) -> bool:
    """Does a run's setting equal a value written on the command line? As shown in the report
    ("(unset)", "32.0"), or as Hydra reads it (null, 32, true: a YAML scalar, parsed as data)."""
    if _show(value) == written:
        return True
    import yaml

    try:
        parsed = yaml.safe_load(written)
    except yaml.YAMLError:
        return False
    if isinstance(parsed, bool) or isinstance(value, bool):
        return parsed is value
    return parsed == value if parsed is None or isinstance(parsed, (int, float, str)) else False


class Pickable(Protocol):
    """What `pick_baseline` reads of an arm: a report's, a tuned report's or a scaling report's."""

    name: str
    runs: list[Run]
    settings: dict[str, str]


ArmT = TypeVar("ArmT", bound=Pickable)


def pick_baseline(arms: list[ArmT], spec: str | None) -> ArmT:
    """`spec` "KEY=VALUE[,KEY=VALUE]" picks the arm with those settings (a value as written, or
    as the report shows it); default: the first arm (the sweep's first job). An arm's name
    ("arm 2") picks that arm."""
    if not spec:
        return arms[0]
    named = [a for a in arms if getattr(a, "name", None) == spec.strip()]
    if named:
        return named[0]
    wanted = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
    if not wanted:
        raise CompareError(f"baseline={spec!r}: expected KEY=VALUE[,KEY=VALUE]")
    matches = [
        a  # by a setting's value, or by the name it shows as ("gated_deltanet 3:1 full": zoo.compare.patterns)
        for a in arms
        if all(_same(a.runs[0].config.get(k), v) or a.settings.get(k) == v.strip() for k, v in wanted.items())
    ]
    if len(matches) != 1:
        shown = "; ".join(f"{a.name}: " + ", ".join(f"{k}={v}" for k, v in a.settings.items()) for a in arms)
        raise CompareError(f"baseline={spec!r} matches {len(matches)} arms (need exactly one); arms: {shown}")
    return matches[0]


PER_TOKEN = ("loss", "ppl")  # metric names measured per token of a run's own tokenizer


def _digest(run: Run) -> dict | None:
    record = run.summary.get("tokenizer")
    return record if isinstance(record, dict) and record.get("digest") else None


def tokenizer_of(run: Run, by_digest: bool = True) -> str:
    """What identifies a run's tokenizer: the summary's digest (with its kind and size), else
    its tokenizer settings."""
    record = _digest(run) if by_digest else None
    if record:
        return f"{record.get('kind', '?')} ({record.get('vocab_size', '?')} ids, {str(record['digest'])[:8]})"
    settings = {k: v for k, v in run.config.items() if k.startswith("tokenizer.") and k != "tokenizer.cache_dir"}
    kind = settings.get("tokenizer.kind", "?")
    size = settings.get("tokenizer.vocab_size")
    rest = ", ".join(
        f"{k.split('.', 1)[1]}={v}"
        for k, v in sorted(settings.items())
        if k not in ("tokenizer.kind", "tokenizer.vocab_size")
    )
    return f"{kind}" + (f" ({size} ids)" if size is not None else "") + (f" [{rest}]" if rest else "")


def check_tokenizers(runs: list[Run], metric: str) -> None:
    """Refuse a per-token metric across runs with different tokenizers: a nat per token of a
    byte tokenizer and one of a 2,048-piece vocabulary measure different things."""
    if metric.rsplit("/", 1)[-1] not in PER_TOKEN:
        return
    measured = [r for r in runs if r.final(metric) is not None]  # failed runs add no value to compare
    by_digest = all(_digest(r) for r in measured)  # else every run by its settings (older summaries)
    seen: dict[str, Run] = {}
    for run in measured:
        seen.setdefault(tokenizer_of(run, by_digest), run)
    if len(seen) > 1:
        shown = "; ".join(f"{name} in {run.path.name}" for name, run in list(seen.items())[:3])
        raise CompareError(
            f"metric={metric} is per token of each run's own tokenizer, and these runs use "
            f"{len(seen)} tokenizers ({shown}): compare metric=val/bpb (bits per byte) instead"
        )


def never_started(run: Run) -> bool:
    """A run that failed before its first logged step (no metrics.csv): a command refused after
    it took its directory, not an arm's result."""
    return run.status == RunStatus.failed and not run.curve and not RunDir(run.path).metrics.is_file()


def load_runs(dirs: list[Path], metric: str) -> tuple[list[Run], list[Run]]:
    """(runs, runs left out: those whose config cannot be read and those that never started)
    under `dirs`; refuses no runs at all and a metric no run logged."""
    runs = find_runs([Path(d) for d in dirs])
    if not runs:
        raise CompareError(f"no run directories (with .hydra/overrides.yaml) under {', '.join(map(str, dirs))}")
    unreadable = [r for r in runs if r.status == RunStatus.damaged and not r.config]
    unreadable += [r for r in runs if never_started(r)]  # a refused command is no arm
    runs = [r for r in runs if r not in unreadable]
    if not runs:
        raise CompareError(f"no run under {', '.join(map(str, dirs))} started: {unreadable[0].error}")
    known = sorted({k for r in runs for k in r.summary.get("metrics", {})} | {k for r in runs for k in r.last_val})
    if known and metric not in known:
        import difflib

        close = difflib.get_close_matches(metric, known, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise CompareError(f"metric={metric}: no run logged it; {hint}metrics: {', '.join(known)}")
    check_tokenizers(runs, metric)
    return runs, unreadable


def compare(
    dirs: list[Path],
    out: Path,
    *,
    metric: str = "val/loss",
    baseline: str | None = None,
    plots: bool = True,
    lengths: list[int] | None = None,
    found: tuple[list[Run], list[Run]] | None = None,
    pairs: bool = False,
    equivalence: float | None = None,
    threshold: float | None = None,
    last_k: int = LAST_K,
    length_rows: list[dict] | None = None,
    extend: tuple = (),
) -> Report:
    """Read the sweeps in `dirs`, write report.md, report.csv, runs.csv (and curves.png,
    final.png) into `out`, and return the report. `lengths` (multiples of the trained context,
    e.g. [1, 2, 4, 8]) adds a length-extrapolation table (lengths.csv, lengths.png). `found`:
    (runs, runs left out) already read (`zoo.compare.table.read_runs`), instead of `dirs`'. Each
    arm at its own best value of one key: `zoo.compare.tune.compare_tuned`. `pairs`: every pair of
    arms compared (pairs.csv), all pairs one family. `equivalence`: a margin each comparison of the
    family is tested against (`zoo.compare.equivalence`); `threshold`: a target each arm's mean is
    tested against (`zoo.compare.threshold`); `last_k`: the validations each run's own spread is
    taken over (`zoo.compare.noise`); `length_rows`: the lengths table as a report's lengths.csv
    holds it (`zoo.compare.committed_lengths.read_lengths`), taken instead of measured; `extend`:
    RoPE context-extension rules (`RopeScaling`) each RoPE arm is also evaluated with at each
    multiple (`zoo.compare.lengths.length_table`)."""
    runs, unreadable = found if found is not None else load_runs(dirs, metric)
    arms, keys = group_arms(runs)
    base = pick_baseline(arms, baseline)
    for arm in arms:
        arm.diff = difference(arm.finals(metric), base.finals(metric)) if arm is not base else None
    report = Report(metric=metric, arms=arms, baseline=base, keys=keys, unreadable=unreadable)
    report.family, report.pairs = declare(arms, base, lambda a: a.finals(metric), pairs)
    tails = beyond_seeds(report, equivalence, threshold, last_k, files=found is None)
    make_out(out)
    report.files["csv"] = write_csv(report, out / "report.csv")
    extra = {"equivalence": equivalence, "threshold": threshold, "last_k": last_k if tails else None}
    report.files.update(
        write_runs(report, out, kind="plain", pairs=pairs, held=held_settings(report.arms), tails=tails, extra=extra)
    )
    if report.pairs is not None:
        report.files["pairs_csv"] = write_pair_rows(report.pairs, out)
    if lengths and length_rows is not None:
        report.multiples = list(lengths)
        report.lengths = place_lengths(arms, length_rows)
        report.files["lengths_csv"] = write_lengths_csv(report, out / "lengths.csv")
    elif lengths:
        # deferred: measuring lengths loads checkpoints (torch, Lightning); a comparison without
        # lengths= answers without them (zoo-compare starts in half the time)
        from zoo.compare.lengths import length_table

        report.multiples = list(lengths)
        report.lengths = length_table(arms, report.multiples, extend)
        report.files["lengths_csv"] = write_lengths_csv(report, out / "lengths.csv")
    if plots:
        report.files["curves"] = plot_curves(report, out / "curves.png")
        report.files["final"] = plot_final(report, out / "final.png")
        if report.lengths:
            report.files["lengths"] = plot_lengths(report, out / "lengths.png")
        routing = plot_routing(report, out / "routing.png")  # mixture-of-experts arms only
        if routing is not None:
            report.files["routing"] = routing
    report.files["md"] = write_markdown(report, out / "report.md", swept(report))
    return report


def beyond_seeds(
    report: Any,
    margin: float | None,
    target: float | None,
    k: int,
    *,
    files: bool,
    values: Callable[[Any], dict] | None = None,
    measured: Callable[[Any], list[Run]] | None = None,
    crossed: Callable[[Any], list[Run]] | None = None,
) -> dict:
    """Set the report's equivalence readings (each comparison of its family against ±`margin`),
    each arm's test against `target`, and its noise beyond seeds (each run's spread over its last
    `k` validations, the init/data-order split); return {run path: last-k spread}. `files` False:
    runs rebuilt from runs.csv, whose last-k spreads are that table's alone. `values` (an arm's
    {seed: value} the threshold test reads; default its final values), `measured` (the runs those
    values come from; default all its runs) and `crossed` (the runs at one setting whose seeds are
    split; default `measured`): a tuned report's held-out values and runs
    (`zoo.compare.tune.compare_tuned`)."""
    metric, m = report.metric, report.family.m if report.family else 1
    values = values or (lambda a: a.finals(metric))
    measured = measured or (lambda a: a.runs)
    crossed = crossed or measured
    report.margin, report.target, report.last_k = margin, target, k
    if margin is not None:
        if report.pairs is not None:
            items = [(f"{label(p.arm)} − {label(p.other)}", p.diff) for p in report.pairs]
        else:
            items = [
                (f"{label(a)} − {label(report.baseline)}", a.diff) for a in report.arms if a is not report.baseline
            ]
        report.equivalent = [(name, equiv.tost(diff, margin, m)) for name, diff in items]
    if target is not None:
        lower = direction(metric)
        if lower is None:
            raise CompareError(f"threshold={target:g}: which way is better for metric={metric} is not known")
        report.reach = thresh.reach([(a.name, list(values(a).values())) for a in report.arms], target, lower)
    tails = {}
    for run in (r for a in report.arms for r in a.runs):
        value = tail_sd(run, metric, k, files=files)
        if value is not None:
            tails[run.path] = value
    report.noise = [arm_noise(a.name, measured(a), metric, tails) for a in report.arms]
    report.parts = [p for p in (attribute(a.name, crossed(a), metric) for a in report.arms) if p is not None]
    return tails


def declare(arms: list, base, values, pairs: bool) -> tuple[Family, list[Pair] | None]:
    """The report's one family (each arm against the baseline; with `pairs`, every pair of arms,
    those against the baseline included) adjusted together, and the pairs when asked for."""
    if not pairs:
        others = [a for a in arms if a is not base]
        what = f"the {len(others)} arm(s) other than the baseline, each against the baseline ({label(base)})"
        return adjust(what, [(label(a), a.diff) for a in others]), None
    found = pairs_of(arms, base, values, difference)
    what = f"every pair of the {len(arms)} arms ({len(found)} pairs, those against the baseline included)"
    return adjust(what, [(f"{label(p.arm)} − {label(p.other)}", p.diff) for p in found]), found


def make_out(out: Path) -> None:
    """Create the report directory; refuse a file in its place."""
    if out.exists() and not out.is_dir():
        raise CompareError(f"out={out} is a file; give a directory for the report (it is created when missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CompareError(f"out={out}: cannot create the report directory ({exc.strerror})") from None


def write_csv(report, path: Path) -> Path:
    """report.rows() as CSV (a Report or a zoo.compare.tune.TunedReport)."""
    rows = report.rows()
    with replacing(path) as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writerow({k: csv_cell(k) for k in rows[0]})  # the header: config keys are copied too
        writer.writerows({k: csv_cell(v) for k, v in row.items()} for row in rows)
    return path
