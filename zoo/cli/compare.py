"""`zoo-compare`: one report for one or more sweeps.

    zoo-compare multirun/2026-11-22/10-00-00                   # report in that directory
    zoo-compare SWEEP_A SWEEP_B out=reports/ablation metric=val/ppl baseline=model.norm=pre
    zoo-compare SWEEP lengths=1,2,4,8      # + perplexity at 1x..8x the trained context
    zoo-compare SWEEP lengths=1,2,4,8 extend=yarn   # ... and each RoPE arm again, stretched by YaRN
    zoo-compare SWEEP tune=optim.lr        # each arm at its own best learning rate
    zoo-compare SWEEP tune=optim.lr,optim.weight_decay   # ... at its best rate and decay together
    zoo-compare SWEEP scale=model.d_model  # each arm across sizes: power laws, compute multipliers
    zoo-compare SWEEP scale=model.d_model tune=optim.lr   # ... each arm at each size at its own best rate
    zoo-compare SWEEP metric=val/bpb       # bits per byte: comparable across tokenizers
    zoo-compare SWEEP pairs=all            # + every pair of arms, all pairs one Holm family
    zoo-compare SWEEP equivalence=0.02     # + each comparison: equivalent within ±0.02, different or cannot tell
    zoo-compare SWEEP threshold=3.28       # + each arm: is its mean below 3.28 at p < 0.01 (the speedrun's rule)
    zoo-compare SWEEP tune=optim.lr equivalence=0.02         # ... on the held-out (leave-one-seed-out) values
    zoo-compare SWEEP scale=model.d_model equivalence=0.02   # ... one reading per arm and size
    zoo-compare recompute=SWEEP/compare    # rebuild a report from its runs.csv; exit 1 if a value differs
    zoo-compare SWEEP scale=model.d_model agree=0.9        # decisions across sizes held to 90% agreement
    zoo-compare plan=PILOT delta=0.02 margin=0.02          # seeds per arm for a difference, an equivalence
    zoo-compare reports/STUDY equivalence=0.05 out=reports/STUDY/equivalence   # a report's runs.csv again, + a key

Writes report.md, report.csv, runs.csv (every run), comparison.json, curves.png and final.png
(tune=: heldout.csv, tuning.png; scale=: scaling.png, decisions.csv, extrapolation.csv, decisions.png;
pairs=all: pairs.csv) into `out` (default: `compare/` inside the first directory). Sweeps may be partly finished: unfinished and failed runs are listed."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from zoo.config.facts.rope import RopeScaling

TOOL = "zoo-compare"
USAGE = f"{TOOL} DIR [DIR ...] [KEY=VALUE ...]"


@dataclass(kw_only=True)
class CompareArgs:
    out: str | None = field(
        default=None, metadata={"help": "the report's directory (default: compare/ inside the first DIR)"}
    )
    metric: str = field(default="val/loss", metadata={"help": "the metric the arms are compared on"})
    baseline: str | None = field(
        default=None,
        metadata={"help": "KEY=VALUE[,KEY=VALUE]: the settings of the baseline arm (default: the first arm)"},
    )
    lengths: str | None = field(
        default=None, metadata={"help": "e.g. 1,2,4,8: also the perplexity at these multiples of the trained context"}
    )
    extend: str | None = field(
        default=None,
        metadata={
            "help": f"with lengths=: RoPE context-extension rules, one or several comma-separated "
            f"({RopeScaling.listed()}; rows: zoo.config.facts.rope.SCALING_FACTS): each arm that rotates with "
            f"RoPE is also evaluated with the rule stretching its trained context by each multiple, as zoo-eval "
            f"runs it"
        },
    )
    tune: str | None = field(
        default=None,
        metadata={
            "help": "a config key, e.g. optim.lr, or keys tuned together, e.g. optim.lr,optim.weight_decay: "
            "compare each arm (config minus seed and KEY) at its own best value of KEY, each seed measured at "
            "the value chosen on the other seeds; with scale=: per size"
        },
    )
    scale: str | None = field(
        default=None,
        metadata={
            "help": "a size key, e.g. model.d_model: each arm "
            "across its sizes, the metric against training compute "
            "as a power law, and the compute multiplier against the "
            "baseline (scaling.png)"
        },
    )
    pairs: str | None = field(
        default=None,
        metadata={
            "help": "all: also compare every pair of arms "
            "(pairs.csv); the report's one family of comparisons "
            "is then every pair (plain and tune= reports)"
        },
    )
    # equivalence=, threshold=, last_k= (zoo.compare.equivalence, .threshold, .noise; with tune= on the
    # held-out values, with scale= per size: zoo.compare.scaled_options)
    equivalence: str | None = field(
        default=None,
        metadata={
            "help": "a margin M in the metric's units: two one-sided tests of each comparison against ±M, "
            "read as equivalent within ±M, different or cannot tell (tune=: the held-out differences; "
            "scale=: each arm against the baseline at each size)"
        },
    )
    threshold: str | None = field(
        default=None,
        metadata={
            "help": "a target value T of the metric: each arm's mean tested one-sided against T at p < 0.01 "
            "(the NanoGPT speedrun's record rule; tune=: its held-out values; scale=: at each size)"
        },
    )
    last_k: str | None = field(
        default=None,
        metadata={"help": "the last K validations each run's own spread is taken over, about their trend (default 5)"},
    )
    recompute: str | None = field(
        default=None,
        metadata={
            "help": "a report directory holding runs.csv: "
            "rebuild every interval of its report from runs.csv "
            "and say whether each, and every line of report.md, equals the report's (exit 1 "
            "when one differs)"
        },
    )
    # decisions across sizes (zoo.compare.transfer) and power and design (zoo.compare.plan)
    agree: float | None = field(
        default=None,
        metadata={
            "help": "with scale=: the rate (default 0.8) at which a smaller size's decisions must agree with "
            "the largest's; given, a design the seed bootstrap cannot take (one seed at a size) is refused"
        },
    )
    plan: str | None = field(
        default=None,
        metadata={"help": "a pilot sweep (or report) directory: print the seeds per arm for delta= and margin="},
    )
    delta: float | None = field(
        default=None, metadata={"help": "with plan=: the true difference to detect at 80% power, in the metric's units"}
    )
    margin: float | None = field(
        default=None,
        metadata={"help": "with plan=: an equivalence margin (±, the metric's units) to show at 80% power"},
    )


def run(argv: list[str]) -> dict:
    from zoo.cli.args import parse
    from zoo.cli.outputs import check_out_dir
    from zoo.compare import Report, ScaleReport, TunedReport, compare, compare_scaled, compare_tuned
    from zoo.compare.errors import CompareError
    from zoo.config.errors import ConfigError
    from zoo.config.records.links import inside

    dirs = [a for a in argv if "=" not in a]
    options = [a for a in argv if "=" in a and not Path(a).exists()]
    dirs += [a for a in argv if "=" in a and Path(a).exists()]
    args, _ = parse(CompareArgs, options_with_baseline(options))
    if args.plan is not None or args.delta is not None or args.margin is not None:
        return _plan(args, dirs)
    if args.agree is not None and not args.scale:
        raise ConfigError(f"agree={args.agree} holds decisions across sizes to a rate: give scale=KEY too")
    if args.recompute:
        from zoo.compare.recompute import recompute

        if dirs or any(
            getattr(args, k)
            for k in (
                "tune",
                "scale",
                "lengths",
                "extend",
                "baseline",
                "out",
                "pairs",
                "equivalence",
                "threshold",
                "last_k",
            )
        ):
            raise ConfigError(
                "recompute=DIR takes nothing else: the report's own comparison.json says what it compared"
            )
        if not Path(args.recompute).is_dir():
            raise ConfigError(f"recompute={args.recompute}: not a directory")
        try:
            lines, equal = recompute(Path(args.recompute))
        except CompareError as exc:
            raise ConfigError(str(exc)) from None
        return {"recompute": str(args.recompute), "lines": lines, "equal": equal}
    if not dirs:
        raise ConfigError("give one or more sweep or run directories: zoo-compare DIR [DIR ...] [out=DIR]")
    missing = [d for d in dirs if not Path(d).is_dir()]
    if missing:
        raise ConfigError(f"not a directory: {missing[0]}")
    # the default report directory lies in the sweep: never reached through a link out of it
    out = Path(args.out) if args.out else inside(Path(dirs[0]) / "compare", dirs[0])
    dirs, found = from_table(args, dirs)  # a report's runs.csv, with its baseline unless one is given
    if args.out:
        check_out_dir("out", args.out, "reports/NAME")  # never into a run's checkpoints or records
    try:
        multiples = [int(m) for m in str(args.lengths).split(",")] if args.lengths else None
    except ValueError:
        raise ConfigError(f"lengths={args.lengths}: give comma-separated integers, e.g. lengths=1,2,4") from None
    if multiples and min(multiples) < 1:
        raise ConfigError(f"lengths={args.lengths}: multiples must be >= 1")
    extend = _rules(args.extend)
    if extend and not multiples:
        raise ConfigError(f"extend={args.extend} stretches RoPE at evaluation lengths: give lengths=1,2,4 too")
    if args.tune and multiples:
        raise ConfigError(f"tune={args.tune} and lengths= cannot be combined: compare lengths without tune=")
    if args.pairs not in (None, "all"):
        raise ConfigError(f"pairs={args.pairs}: the only value is pairs=all (every pair of arms)")
    if args.pairs and args.scale:
        raise ConfigError(
            f"pairs=all and scale={args.scale} cannot be combined: a scaled report compares each arm "
            f"with the baseline by compute multipliers; compare one size with pairs=all"
        )
    pairs = args.pairs == "all"
    if args.scale and multiples:
        raise ConfigError(f"scale={args.scale} and lengths= cannot be combined: run them as two comparisons")
    report: Report | ScaleReport | TunedReport
    try:
        from zoo.compare.equivalence import parse_margin
        from zoo.compare.noise import LAST_K, parse_k
        from zoo.compare.threshold import parse_target
        from zoo.compare.verdict import direction

        margin = parse_margin(args.equivalence)
        target = parse_target(args.threshold, direction(args.metric), args.metric)
        last_k = parse_k(args.last_k) if args.last_k else LAST_K
    except CompareError as exc:
        raise ConfigError(str(exc)) from None
    try:
        if args.scale:
            report = compare_scaled(
                [Path(d) for d in dirs],
                out,
                key=args.scale,
                metric=args.metric,
                baseline=args.baseline,
                tune=args.tune,
                agree=args.agree,
                found=found,
                equivalence=margin,
                threshold=target,
                last_k=last_k,
            )
        elif args.tune:
            report = compare_tuned(
                [Path(d) for d in dirs],
                out,
                key=args.tune,
                metric=args.metric,
                baseline=args.baseline,
                pairs=pairs,
                found=found,
                equivalence=margin,
                threshold=target,
                last_k=last_k,
            )
        else:
            report = compare(
                [Path(d) for d in dirs],
                out,
                metric=args.metric,
                baseline=args.baseline,
                lengths=multiples,
                extend=extend,
                pairs=pairs,
                equivalence=margin,
                threshold=target,
                last_k=last_k,
                found=found,
                plots=found is None,  # a table holds no validation curves to draw
            )
    except CompareError as exc:  # a mistake the user can fix, raised where it was found
        raise ConfigError(str(exc)) from None
    from zoo.compare import RunStatus

    for warning in getattr(report, "warnings", []):
        print(f"zoo-compare: warning: {warning}", file=sys.stderr)
    runs = [r for a in report.arms for r in a.runs] + report.unreadable
    for run in (r for r in runs if r.status == RunStatus.damaged):
        print(f"zoo-compare: warning: {run.error}; left out of the comparison", file=sys.stderr)
    for run in (r for r in report.unreadable if r.status == RunStatus.failed):
        print(
            f"zoo-compare: {run.path} never started ({run.error or 'failed.json'}); left out of the comparison",
            file=sys.stderr,
        )
    return {
        "out": str(out),
        "arms": len(report.arms),
        "runs": sum(len(a.runs) for a in report.arms),
        "files": {k: str(v) for k, v in report.files.items()},
    }


def from_table(args: CompareArgs, dirs: list[str]) -> tuple[list[str], tuple[list, list] | None]:
    """(the directories to name, the runs to compare or None): a report directory holding runs.csv
    and comparison.json, given alone, is read as its table (`zoo.compare.table.read_runs`, as
    `recompute=` reads it), so a committed report, whose run directories are not kept, is compared
    again with a key it lacked (equivalence=, threshold=, pairs=all). Its runs are grouped into the
    arms that report placed them in, so the comparison must be of its kind, on its keys; its
    baseline is the report's unless baseline= names another (`args.baseline` is set to it)."""
    from zoo.compare.table import RUNS, SPEC, read_runs
    from zoo.config.errors import ConfigError

    tables = [d for d in dirs if (Path(d) / RUNS).is_file() and (Path(d) / SPEC).is_file()]
    if not tables:
        return dirs, None
    if len(dirs) > 1:
        raise ConfigError(f"{tables[0]} is a report (it holds {RUNS}): compare it alone, not with other directories")
    spec, runs, left_out = read_runs(Path(tables[0]))
    kind = "scaled" if args.scale else "tuned" if args.tune else "plain"
    keys = ", ".join(f"{k}={spec[k]}" for k in ("scale", "tune") if spec.get(k)) or "no scale= or tune="
    if kind != spec["kind"] or args.scale != spec.get("scale") or args.tune != spec.get("tune"):
        raise ConfigError(
            f"{tables[0]}: its {RUNS} holds a {spec['kind']} comparison ({keys}), and its runs are grouped "
            f"into that report's arms: compare it with the same keys"
        )
    if args.metric not in spec["metrics"]:
        raise ConfigError(f"metric={args.metric}: {tables[0]}/{RUNS} holds {', '.join(spec['metrics'])}")
    args.baseline = args.baseline or spec["baseline"]
    return list(dict.fromkeys(str(r.root) for r in runs)), (runs, left_out)


def _plan(args: CompareArgs, dirs: list[str]) -> dict:
    """`plan=PILOT delta=D margin=M`: the lines of `zoo.compare.plan.plan`."""
    from zoo.compare.errors import CompareError
    from zoo.compare.plan import plan
    from zoo.config.errors import ConfigError

    if not args.plan:
        raise ConfigError("delta= and margin= plan a sweep: give the pilot too, plan=PILOT_DIR delta=VALUE")
    others = [
        k for k in ("tune", "scale", "lengths", "extend", "out", "pairs", "recompute", "agree") if getattr(args, k)
    ]
    if dirs or others:
        given = f"{others[0]}=" if others else dirs[0]
        raise ConfigError(f"plan={args.plan} takes metric=, baseline=, delta= and margin= only, not {given}")
    if not Path(args.plan).is_dir():
        raise ConfigError(f"plan={args.plan}: not a directory")
    try:
        lines = plan(Path(args.plan), delta=args.delta, margin=args.margin, metric=args.metric, baseline=args.baseline)
    except CompareError as exc:
        raise ConfigError(str(exc)) from None
    return {"plan": str(args.plan), "lines": lines}


def _rules(value: str | None) -> tuple:
    """extend=RULE[,RULE]: the RoPE context-extension rules, each refused on one line if unknown."""
    from zoo.config.facts.rope import RopeScaling

    if not value:
        return ()
    return tuple(dict.fromkeys(RopeScaling.parse(v.strip(), "extend") for v in str(value).split(",")))


def options_with_baseline(options: list[str]) -> list[str]:
    """`baseline=model.norm=pre` holds a second '=': quote its value for the dotlist parser."""
    out = []
    for option in options:
        key, _, value = option.partition("=")
        quoted = ("baseline", "lengths", "extend", "tune", "recompute", "plan", "equivalence", "threshold", "last_k")
        out.append(f"{key}={json.dumps(value)}" if key in quoted else option)
    return out


def usage() -> str:
    from zoo.cli.tool import Section, help_text

    return help_text(
        USAGE,
        __doc__,
        [Section("options", CompareArgs)],
        notes=[
            "DIR: a sweep (multirun/...) or run directory; a DIR whose name holds '=' is "
            "read as a directory when it exists"
        ],
    )


def main(argv: list[str] | None = None) -> None:
    from zoo.cli.tool import serve

    serve(TOOL, _answer, usage, argv)


def _answer(argv: list[str]) -> None:
    result = run(argv)
    if "plan" in result:  # lines to read
        print("\n".join(result["lines"]))
        return
    if "recompute" in result:  # lines to read, and the exit status says whether all were equal
        print("\n".join(result["lines"]))
        if not result["equal"]:
            sys.exit(1)
        return
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
