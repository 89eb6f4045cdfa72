"""One run directory of a sweep, as zoo-train leaves it: `.hydra/` (the composed config and
the overrides, written when the job starts), `metrics.csv` (while it trains), `summary.json`
(when it finishes) or `failed.json` (when it stopped with an error)."""

from __future__ import annotations

import csv
import enum
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zoo.config.errors import ConfigError
from zoo.config.facts.axes import model_overrides
from zoo.config.records.links import first_link_out, link_out, refusal
from zoo.config.records.reader import LARGEST_FIGURE, figure_problem, read_text
from zoo.config.records.rundir import BOOKKEEPING, DamagedRecord, RunDir, RunFailure, RunSummary
from zoo.config.records.yaml_files import load_yaml
from zoo.config.schema.convert import as_model_config
from zoo.config.schema.flops import mtp_flops
from zoo.config.schema.model import model_defaults
from zoo.config.schema.task import task_defaults

ORDER_SEED = "data.order_seed"  # the data-order seed: like the seed, a replicate's (in BOOKKEEPING)
IGNORED = BOOKKEEPING  # never an arm's distinguishing setting
# the arm a run rebuilt from runs.csv was placed in (`zoo.compare.table.read_runs`): it keeps the
# report's arms apart, as their runs' configs did, but is no setting of theirs and names no arm
PLACED = "compare.arm"
NOT_SETTINGS = (*IGNORED, PLACED)


class RunStatus(str, enum.Enum):
    finished = "finished"
    failed = "failed"  # stopped with an error (failed.json)
    unfinished = "unfinished"  # still running, killed, or requeued: no final summary yet
    damaged = "damaged"  # summary.json or failed.json cannot be read: left out, named


@dataclass
class Run:
    """What a comparison needs of one run directory."""

    path: Path
    overrides: list[str]
    config: dict[str, Any]  # flattened `.hydra/config.yaml`, dotted keys
    status: RunStatus
    summary: dict = field(default_factory=dict)
    error: str = ""
    curve: list[tuple[int, float]] = field(default_factory=list)  # (tokens seen, val/loss)
    last_val: dict[str, float] = field(default_factory=dict)  # last validation row of metrics.csv
    # the directory it was found under, or the one holding it when it was named alone (runs.csv
    # names the run relative to it: `moe_a`, `0` whether `moe_a` or `moe_a/0` was named)
    root: Path | None = None
    tail_sd: float | None = None  # runs.csv's spread over the last k validations (zoo.compare.noise)
    tail_from: float | None = None  # runs.csv's start of that window, a fraction of the last step

    @property
    def seed(self) -> Any:
        """The replicate: the seed, or "SEED/ORDER" when the data order has a seed of its own
        (`data.order_seed` set to another value than the seed)."""
        seed, order = self.config.get("seed"), self.config.get(ORDER_SEED)
        return seed if order is None or order == seed else f"{seed}/{order}"

    @property
    def arm_key(self) -> tuple:
        """Every setting except the seed (and bookkeeping): runs with the same key are replicates."""
        return tuple(sorted((k, repr(v)) for k, v in self.config.items() if not k.startswith(IGNORED)))

    def final(self, metric: str) -> float | None:
        """The final value of `metric`: the summary's when finished, else None."""
        if self.status != RunStatus.finished:
            return None
        value = self.summary.get("metrics", {}).get(metric)
        return float(value) if value is not None else None


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """{"model": {"norm": "pre"}} -> {"model.norm": "pre"}; lists stay values."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flatten(value, f"{prefix}{key}." if isinstance(value, dict) else f"{prefix}{key}"))
    return out


def read_run(path: Path, root: Path | None = None) -> Run:
    """A run from its directory (which has `.hydra/overrides.yaml`), found under `root` (the
    directory the user named; default: the run's own). A run reached through a link out of
    `root`, or holding a link out of its own directory, is damaged and none of its files is read
    (`zoo.config.records.links`): its message names the link, never a file's content."""
    from omegaconf import OmegaConf

    files = RunDir(path)
    outward = [(root, link_out(path, root))] if root is not None else []
    for base, link in (*outward, (path, first_link_out(path))):
        if link is not None:
            return Run(path=path, overrides=[], config={}, status=RunStatus.damaged, error=str(refusal(link, base)))
    try:
        overrides = OmegaConf.to_container(load_yaml(files.overrides))
        if not isinstance(overrides, list):
            raise ValueError("not a list")
        config_file = files.hydra_config
        config = OmegaConf.to_container(load_yaml(config_file), resolve=False) if config_file.is_file() else {}
        if not isinstance(config, dict):
            raise ValueError("not a mapping")
    except Exception as exc:  # yaml and OmegaConf raise many types for a damaged file
        reason = " ".join(str(exc).split())[:160]
        return Run(
            path=path,
            overrides=[],
            config={},
            status=RunStatus.damaged,
            error=f"{files.hydra} is damaged ({reason}); run it again or remove the run directory",
        )
    summary, error, status = {}, "", RunStatus.unfinished
    try:
        if files.summary.is_file():
            summary = read_summary(path)
            if summary.get("status") == "finished":
                status = RunStatus.finished
                if not any(v is not None for v in (summary.get("metrics") or {}).values()):
                    raise DamagedRecord(
                        f"{files.summary} says finished but holds no metrics; run the "
                        f"command again (it validates the last checkpoint) or remove the run "
                        f"directory"
                    )
                check_figures(summary, files.summary)
        if status != RunStatus.finished and files.failed.is_file():
            status = RunStatus.failed
            error = RunFailure.read(path).error
    except DamagedRecord as exc:
        summary, status, error = {}, RunStatus.damaged, str(exc)
    try:
        curve, last_val = read_curve(files.metrics)
    except (ValueError, KeyError, csv.Error) as exc:
        curve, last_val = [], {}
        if status != RunStatus.damaged:
            status, error = (
                RunStatus.damaged,
                str(exc)
                if isinstance(exc, DamagedRecord)
                else f"{files.metrics} is damaged ({exc}); run it again or remove the run directory",
            )
    return Run(
        path=path,
        overrides=overrides,
        config=as_arm(with_model_defaults(with_resolved(flatten(config), files))),
        status=status,
        summary=summary,
        error=error,
        curve=curve,
        last_val=last_val,
    )


def with_resolved(config: dict[str, Any], files: RunDir) -> dict[str, Any]:
    """Interpolations (`trainer.max_steps: ${zoo.steps_for_tokens:3}`) at the values the run
    resolved them to, from the run's own config.yaml; left as written where it has none."""
    if not any(isinstance(v, str) and "${" in v for v in config.values()) or not files.config.is_file():
        return config
    from omegaconf import OmegaConf

    try:
        resolved = flatten(OmegaConf.to_container(load_yaml(files.config), resolve=False))
    except Exception:  # a damaged config.yaml: the interpolations stay as written
        return config
    return {k: resolved.get(k, v) if isinstance(v, str) and "${" in v else v for k, v in config.items()}


def with_model_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """A flattened config with the model and task keys it predates at their schema defaults: a
    run made before a key existed ran with the behaviour that default keeps, and is the same arm
    as a run that sets it there."""
    for section, defaults in (("model", model_defaults), ("task", task_defaults)):
        if any(k.startswith(f"{section}.") for k in config):
            config = {
                **config,
                **{f"{section}.{k}": v for k, v in defaults().items() if f"{section}.{k}" not in config},
            }
    return config


BRANCHED = "(branched)"  # how an arm shows runs branched from a checkpoint (each seed from its own)


def as_arm(config: dict[str, Any]) -> dict[str, Any]:
    """`branch_from` names each seed's own parent checkpoint: it says that a run was branched,
    not which arm it belongs to, so runs branched from their seeds' parents are one arm (and a run
    trained from scratch with the same settings another)."""
    if config.get("branch_from"):
        return {**config, "branch_from": BRANCHED}
    return config


COUNTS = (
    ("tokens_seen",),
    ("global_step",),
    ("train_seconds",),
    ("wall_seconds",),
    ("tokens_per_s",),
    ("model", "total_params"),
    ("model", "non_embedding_params"),
    ("model", "flops_per_token"),
)


def check_figures(summary: dict, path: Path) -> None:
    """A finished run's figures must be real: metrics finite and below LARGEST_FIGURE, losses,
    counts, times and rates not negative. DamagedRecord naming the figure otherwise."""
    import math

    def bad(name: str, value: float, why: str) -> DamagedRecord:
        return DamagedRecord(
            f"{path} is damaged ({name} is {value!r}: {why}); run it again or remove the run directory"
        )

    for name, value in (summary.get("metrics") or {}).items():
        why = figure_problem(name, value) if value is not None else None
        if why is not None:
            raise bad(name, value, why)
    for keys in COUNTS:
        node = at(summary, *keys)
        if (
            isinstance(node, (int, float))
            and not isinstance(node, bool)
            and (not math.isfinite(node) or node < 0 or node > LARGEST_FIGURE)
        ):
            raise bad(".".join(keys), node, "not a count, time or rate")


def read_summary(run_dir: Path) -> dict:
    """The run's summary.json (`RunSummary`) as a dict whose `metrics` are numbers (or null);
    a key an older zoo did not write reads as None. DamagedRecord naming the file otherwise."""
    return RunSummary.read(run_dir).as_dict()


def read_curve(metrics_csv: Path) -> tuple[list[tuple[int, float]], dict[str, float]]:
    """(tokens seen, val/loss) at each validation, and the last validation row's metrics."""
    if not metrics_csv.exists():
        return [], {}
    tokens_at: dict[int, int] = {}
    vals: list[tuple[int, dict[str, float]]] = []
    text = read_text(metrics_csv)  # zoo.config.records.reader: a regular file of bounded size, UTF-8
    for row in csv.DictReader(io.StringIO(text, newline="")):
        step = _count(row, "step") if row.get("step") else None
        if step is None:
            continue
        if row.get("tokens_seen"):
            tokens_at[step] = max(tokens_at.get(step, 0), _count(row, "tokens_seen"))
        if row.get("val/loss"):
            vals.append((step, {k: float(v) for k, v in row.items() if k.startswith("val/") and v}))
    curve = [(_tokens_at(tokens_at, step), metrics["val/loss"]) for step, metrics in vals]
    return curve, (vals[-1][1] if vals else {})


def _count(row: dict, column: str) -> int:
    """A step or token count of a metrics.csv row; ValueError (the file is damaged) for one that
    is not a finite, non-negative number."""
    import math

    value = float(row[column])
    if not math.isfinite(value) or value < 0:
        where = "" if column == "step" else f" at step {row.get('step')}"
        raise ValueError(f"{column} is {row[column]!r}{where}, not a count")
    return int(value)


def _tokens_at(tokens_at: dict[int, int], step: int) -> int:
    """Tokens seen by `step`: logged at that step, else scaled from the nearest logged step (the
    global batch is fixed, so tokens grow in proportion to steps); 0 when nothing was logged."""
    if step in tokens_at:
        return tokens_at[step]
    if not tokens_at:
        return 0
    near = min(tokens_at, key=lambda s: (abs(s - step), s))
    return round(tokens_at[near] * (step + 1) / (near + 1))


def find_runs(dirs: list[Path]) -> list[Run]:
    """Every run directory under `dirs` (a sweep directory, a run directory, or a tree of
    them): the directories in the order given, each in sweep order (job numbers numerically)."""
    found: dict[Path, Path] = {}  # run directory -> the directory it was found under
    for root in dirs:
        root = Path(root)
        if RunDir(root).overrides.is_file():
            here = [root]
        else:
            here = sorted((p.parent.parent for p in root.rglob(f"{RunDir.HYDRA}/{RunDir.OVERRIDES}")), key=_natural)
        for p in here:
            found.setdefault(p, root)
    runs = [read_run(p, root) for p, root in found.items()]
    for run, root in zip(runs, found.values()):
        run.root = root.parent if root == run.path else root  # a run named alone: its sweep holds it
    return runs


def _natural(path: Path) -> tuple:
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in path.parts)


def at(summary: dict, *keys: str) -> Any:
    """The summary's value at keys (e.g. "model", "total_params"), None where absent."""
    node: Any = summary
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def number(run: Run, *keys: str) -> float | None:
    """The summary's number at keys (e.g. "model", "non_embedding_params"), None where absent."""
    node = at(run.summary, *keys)
    return float(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None


BACKWARD_FACTOR = 3  # training FLOPs per token = forward + backward ≈ 3 × forward


def training_flops_per_token(run: Run) -> float | None:
    """Forward FLOPs per training token: the model's and those of the modules that run only in
    training (task.mtp_depth's), as the summary records them (`train_flops_per_token`, or the
    runs.csv column of that name). A record from before zoo wrote it: the model's
    `flops_per_token`, plus the multi-token prediction modules counted from the run's config
    (`zoo.config.schema.flops.mtp_flops`) when it has any. None when neither is recorded."""
    recorded = number(run, "train_flops_per_token")
    if recorded is not None:
        return recorded
    forward = number(run, "model", "flops_per_token")
    depth = run.config.get("task.mtp_depth")
    if forward is None or not isinstance(depth, int) or isinstance(depth, bool) or depth <= 0:
        return forward
    try:
        model = as_model_config(model_overrides(run.config))
    except ConfigError:  # a config of another zoo version: its MTP modules cannot be counted
        return None
    return forward + mtp_flops(model, depth, int(run.config.get("data.seq_len") or model.max_seq_len))


def trains_more_than_it_keeps(runs: list[Run]) -> bool:
    """Whether any of `runs` trained modules the model does not keep (task.mtp_depth's): its
    FLOPs per training token differ from the model's."""
    return any(training_flops_per_token(r) != number(r, "model", "flops_per_token") for r in runs)


def training_compute(run: Run) -> float | None:
    """C = 3 × forward FLOPs per training token × tokens seen; None when either is not known.
    The FLOPs are the active ones (a mixture's router, top-k and shared experts) and include the
    modules that run only in training (`training_flops_per_token`)."""
    flops, tokens = training_flops_per_token(run), number(run, "tokens_seen")
    if flops is None or tokens is None or flops <= 0 or tokens <= 0:
        return None
    return BACKWARD_FACTOR * flops * tokens


def epochs(run: Run) -> float | None:
    """Tokens seen over the tokens of the training split (None when the split's size is not
    known, e.g. a streamed source, or a run from before zoo recorded it)."""
    seen, split = number(run, "tokens_seen"), number(run, "data", "train_tokens")
    return seen / split if seen is not None and split else None
