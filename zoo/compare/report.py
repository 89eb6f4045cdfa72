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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from zoo.compare.errors import CompareError
from zoo.compare.escape import code, csv_cell, text
from zoo.compare.plots import half_width, plot_curves, plot_final, plot_lengths
from zoo.compare.routing_plot import plot_routing
from zoo.compare.runs import IGNORED, Run, RunStatus, epochs, find_runs, number
from zoo.compare.stats import FEW_SEEDS, ZERO_SPREAD, Difference, difference, mean_std, t_quantile
from zoo.compare.table import run_place, vocab_size, write_pair_rows, write_runs
from zoo.compare.verdict import Family, Pair, adjust, label, load_flag, pair_lines, pairs_of, verdict
from zoo.config.records.atomic import replacing, write_text
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
            out.append(row)
        return out


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
        if len(values) > 1 and not key.startswith(IGNORED):
            keys.append(key)
    for arm in arms:
        arm.settings = {k: _show(arm.runs[0].config.get(k)) for k in keys}
    return arms, keys


def _show(value) -> str:
    return "(unset)" if value is None else str(value)


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
    """`spec` "KEY=VALUE[,KEY=VALUE]" picks the arm with those settings; default: the first arm
    (the sweep's first job). An arm's name ("arm 2") picks that arm."""
    if not spec:
        return arms[0]
    named = [a for a in arms if getattr(a, "name", None) == spec.strip()]
    if named:
        return named[0]
    wanted = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
    if not wanted:
        raise CompareError(f"baseline={spec!r}: expected KEY=VALUE[,KEY=VALUE]")
    matches = [a for a in arms if all(_same(a.runs[0].config.get(k), v) for k, v in wanted.items())]
    if len(matches) != 1:
        shown = "; ".join(f"{a.name}: " + ", ".join(f"{k}={v}" for k, v in a.settings.items()) for a in arms)
        raise CompareError(f"baseline={spec!r} matches {len(matches)} arms (need exactly one); arms: {shown}")
    return matches[0]


# the settings a reader of an ablation asks for first: shown once, when every run shares them
DESIGN_KEYS = (
    "data.source",
    "data.path",
    "tokenizer.kind",
    "tokenizer.vocab_size",
    "data.seq_len",
    "data.global_batch_size",
    "trainer.max_steps",
    "optim.kind",
    "optim.lr",
    "optim.weight_decay",
    "scheduler.kind",
    "scheduler.warmup_steps",
    "model.parametrization",
    "model.mup_base_d_model",
    "model.mup_base_head_dim",
)
# the model's shape: shown with the settings held fixed (None: the family's default)
SHAPE_KEYS = ("model.d_model", "model.n_layers", "model.n_heads", "model.n_kv_heads", "model.d_ff")


def design_line(runs: list[Run]) -> str:
    """ "Held fixed: data.source=kjv, ...; seeds: 0, 1, 2": the DESIGN_KEYS every run shares (a key
    that varies is an arm's or a size's setting and shows in the tables), and the seeds run."""
    fixed = []
    for key in DESIGN_KEYS:
        values = {repr(r.config.get(key)) for r in runs}
        if len(values) == 1 and runs[0].config.get(key) is not None:
            if key == "tokenizer.vocab_size" and runs[0].config.get("tokenizer.kind") == "byte":
                continue  # the byte tokenizer's size is fixed whatever this says
            fixed.append(code(f"{key}={_show(runs[0].config.get(key))}"))
    fixed += shape_items(runs)
    seeds = sorted({r.seed for r in runs}, key=lambda s: (str(type(s)), s))
    return f"Held fixed: {', '.join(fixed) or '–'}. Seeds: {', '.join(text(s) for s in seeds)}."


def shape_items(runs: list[Run]) -> list[str]:
    """The model's shape every run shares (d_model, layers, heads, KV heads, d_ff, and the
    vocabulary from the runs' tokenizer records): a key that varies is an arm's or a size's."""
    out = []
    for key in SHAPE_KEYS:
        if not any(key in r.config for r in runs):
            continue
        values = {repr(r.config.get(key)) for r in runs}
        if len(values) == 1:
            value = runs[0].config.get(key)
            if value is None and key == "model.d_ff":
                out += _d_ff_sized(runs)  # d_ff unset may still be sized by another key
                continue
            out.append(code(f"{key}={value}") if value is not None else f"{code(key)} at its default")
    vocab = {vocab_size(r) for r in runs if r.status == RunStatus.finished}
    (only,) = vocab if len(vocab) == 1 else (None,)
    if only is not None:
        out.append(f"vocabulary V = {int(only):,}")
    return out


# the keys that size d_ff when it is unset (zoo.config.schema.model): a d_ff at its default is none of them
D_FF_SIZING = ("model.ff_mult", "model.param_budget")


def _d_ff_sized(runs: list[Run]) -> list[str]:
    """The held-fixed item for an unset model.d_ff: the key that sizes it where every run shares
    one, nothing where one varies (an arm's or a size's setting), else "at its default"."""
    for key in D_FF_SIZING:
        values = {repr(r.config.get(key)) for r in runs}
        if values != {repr(None)}:
            return [code(f"{key}={_show(runs[0].config.get(key))}")] if len(values) == 1 else []
    return [f"{code('model.d_ff')} at its default"]


def _span(values: list[float], fmt) -> str:
    low, high = min(values), max(values)
    return fmt(low) if high - low <= 1e-9 * max(abs(high), 1.0) else f"{fmt(low)}–{fmt(high)}"


def accounting_line(runs: list[Run]) -> str:
    """ "Training: N = ... non-embedding parameters, D = ... tokens (D/N = ...), ... epochs of the
    training split": the accounting of the finished runs, a range where it differs between them.
    N is the active parameters (a mixture of experts: those one token passes through), with the
    total beside it where a run holds more."""
    done = [r for r in runs if r.status == RunStatus.finished]
    pairs = [
        (
            number(r, "model", "active_non_embedding_params") or number(r, "model", "non_embedding_params"),
            number(r, "tokens_seen"),
        )
        for r in done
    ]
    totals = [number(r, "model", "non_embedding_params") for r in done]
    n, d = [nv for nv, _ in pairs if nv], [dv for _, dv in pairs if dv]
    if not n or not d:
        return "Training: the runs do not record their parameters and tokens."
    ratio = [dv / nv for nv, dv in pairs if nv and dv]
    seen = [e for e in (epochs(r) for r in done) if e is not None]
    total = ""
    if any(t and nv and t != nv for t, (nv, _) in zip(totals, pairs)):
        total = f" active (of {_span([t for t in totals if t], lambda v: f'{v:,.0f}')} in all)"
    text = (
        f"Training: N = {_span(n, lambda v: f'{v:,.0f}')} non-embedding parameters{total}, "
        f"D = {_span(d, lambda v: f'{v:,.0f}')} tokens (D/N = {_span(ratio, lambda v: f'{v:.3g}')})"
    )
    return text + (
        f", {_span(seen, lambda v: f'{v:.2f}')} epochs of the training split."
        if seen
        else "; the training split's size is not recorded (epochs unknown)."
    )


FLAG_SENTENCE = (
    "A difference whose seeds have zero spread, or with fewer than 2 seeds on a side, gets no "
    "interval and no p-value, and is flagged on its row and under Warnings."
)
RUNS_SENTENCE = (
    "Every run (its final metrics, N, D, compute and status) is in runs.csv beside this report; "
    "`zoo-compare recompute=DIR` rebuilds every interval from it."
)


def flag_warnings(diffs: list[tuple[str, Difference | None]]) -> list[str]:
    """One warning per difference without an interval because of its design: zero spread over
    the seeds, or fewer than 2 seeds on a side. Neither gets a p-value."""
    out = []
    for name, diff in diffs:
        if diff is None or not diff.flag:
            continue
        why = (
            "its seeds' values (or their differences from the baseline's) do not vary: a zero-width "
            "interval would claim certainty, so none is given"
            if diff.flag == ZERO_SPREAD
            else "a spread needs 2 or more seeds on each side"
        )
        out.append(f"{name}: {diff.flag} ({why}); no interval and no p-value")
    return out


def problem_lines(runs: list[Run], unreadable: list[Run]) -> list[str]:
    """The "Runs without a final result" section: every run that failed, is unfinished or is
    damaged (named by its sweep and its directory there, as runs.csv names it), with its error or
    its last validation; empty when there is none."""
    problems = [r for r in runs if r.status != RunStatus.finished] + unreadable
    if not problems:
        return []
    lines = ["", "## Runs without a final result", ""]
    for r in problems:
        detail = (
            f": {text(r.error)}"
            if r.error
            else (
                f" (last validation {r.last_val['val/loss']:.4f} at {r.curve[-1][0]:,} tokens)"
                if r.curve and "val/loss" in r.last_val
                else ""
            )
        )
        lines.append(f"- {code('/'.join(run_place(r)))} {r.status.value}{detail}")  # no machine path
    return lines


def repeat_warnings(runs: list[Run]) -> list[str]:
    """One warning when finished runs read their training split more than once."""
    over = [e for e in (epochs(r) for r in runs if r.status == RunStatus.finished) if e is not None and e > 1.0]
    if not over:
        return []
    return [
        f"{len(over)} run(s) read their training split up to {max(over):.2f} times: later tokens repeat "
        f"earlier ones, so the validation loss mixes architecture with memorisation"
    ]


def few_seed_warnings(diffs: list[tuple[str, Difference | None]]) -> list[str]:
    """One warning per interval that rests on fewer than 2 degrees of freedom."""
    out = []
    for name, diff in diffs:
        if diff is not None and diff.few_df and diff.df is not None:
            out.append(
                f"{name}: its interval rests on {diff.df:.2g} degree of freedom (t quantile "
                f"{t_quantile(0.975, diff.df):.1f}; 2 seeds): its width depends on which seeds happen to "
                f"pair; run 3 or more seeds before drawing a conclusion"
            )
    return out


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
) -> Report:
    """Read the sweeps in `dirs`, write report.md, report.csv, runs.csv (and curves.png,
    final.png) into `out`, and return the report. `lengths` (multiples of the trained context,
    e.g. [1, 2, 4, 8]) adds a length-extrapolation table (lengths.csv, lengths.png). `found`:
    (runs, runs left out) already read (`zoo.compare.table.read_runs`), instead of `dirs`'. Each
    arm at its own best value of one key: `zoo.compare.tune.compare_tuned`. `pairs`: every pair of
    arms compared (pairs.csv), all pairs one family."""
    runs, unreadable = found if found is not None else load_runs(dirs, metric)
    arms, keys = group_arms(runs)
    base = pick_baseline(arms, baseline)
    for arm in arms:
        arm.diff = difference(arm.finals(metric), base.finals(metric)) if arm is not base else None
    report = Report(metric=metric, arms=arms, baseline=base, keys=keys, unreadable=unreadable)
    report.family, report.pairs = declare(arms, base, lambda a: a.finals(metric), pairs)
    make_out(out)
    report.files["csv"] = write_csv(report, out / "report.csv")
    report.files.update(write_runs(report, out, kind="plain", pairs=pairs))
    if report.pairs is not None:
        report.files["pairs_csv"] = write_pair_rows(report.pairs, out)
    if lengths:
        # deferred: measuring lengths loads checkpoints (torch, Lightning); a comparison without
        # lengths= answers without them (zoo-compare starts in half the time)
        from zoo.compare.lengths import length_table

        report.multiples = list(lengths)
        report.lengths = length_table(arms, report.multiples)
        report.files["lengths_csv"] = write_lengths_csv(report, out / "lengths.csv")
    if plots:
        report.files["curves"] = plot_curves(report, out / "curves.png")
        report.files["final"] = plot_final(report, out / "final.png")
        if report.lengths:
            report.files["lengths"] = plot_lengths(report, out / "lengths.png")
        routing = plot_routing(report, out / "routing.png")  # mixture-of-experts arms only
        if routing is not None:
            report.files["routing"] = routing
    report.files["md"] = write_markdown(report, out / "report.md", dirs)
    return report


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


def write_lengths_csv(report: Report, path: Path) -> Path:
    with replacing(path) as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "arm",
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
            arm = row["arm"]
            for m, cell in row["cells"].items():
                length = row["trained"] * m if row["trained"] else ""
                settings = [csv_cell(arm.settings.get(k, "")) for k in report.keys]
                if isinstance(cell, tuple):
                    low, high = _mean_interval(*cell)
                    note = "" if low is not None else FEW_SEEDS if cell[2] < 2 else ZERO_SPREAD
                    writer.writerow(
                        [
                            arm.name,
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
                    writer.writerow([arm.name, *settings, length, m, "", "", "", "", 0, cell or "no finished run"])
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
        lines.append("| " + " | ".join([row["arm"].name, *settings, *cells]) + " |")
    return lines


def _num(value, digits: int = 4) -> str:
    if value is None:
        return "–"
    if abs(value) >= 1e4:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


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
        "tokens/s" + (" (machine load †)" if load else ""),
        "runs",
    ]
    means = {
        a.name: (mean_std(list(a.finals(report.metric).values()))[0] if a.finals(report.metric) else None)
        for a in report.arms
    }
    lines = [
        f"# Sweep comparison: {m}",
        "",
        text(verdict(report.arms, means, report.baseline, report.metric, pairs=report.pairs)),
        "",
        f"Runs from {', '.join(code(d) for d in dirs)}. One row per arm (same config, different "
        f"seeds); columns are the settings that differ between arms. Final {m} of finished runs; "
        f"Δ = arm − baseline with a 95% Student-t interval (paired over seeds when both arms ran "
        f"the same seeds, Welch otherwise) and the two-sided p-value of no difference; with several arms, "
        f"Holm's adjusted p-value in brackets (it keeps the chance of any false finding among them at 5%). "
        f"An interval on 1 degree of freedom (2 seeds) is marked (1 df). {FLAG_SENTENCE} {RUNS_SENTENCE}",
        "",
        text(report.family.sentence()) if report.family else "",
        "",
        design_line([r for a in report.arms for r in a.runs]),
        "",
        accounting_line([r for a in report.arms for r in a.runs]),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
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
    if load:
        lines += ["", text(f"† {load}.")]
    if report.pairs is not None:
        lines += pair_lines(report.pairs, report.metric)
    lines += problem_lines([r for a in report.arms for r in a.runs], report.unreadable)
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
