"""One run directory of a sweep, as zoo-train leaves it: `.hydra/` (the composed config and
the overrides, written when the job starts), `metrics.csv` (while it trains), `summary.json`
(when it finishes) or `failed.json` (when it stopped with an error)."""

from __future__ import annotations

import csv
import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

FAILED_FILE = "failed.json"
# config keys that do not change what is learned: never an arm's distinguishing setting
IGNORED = ("seed", "ckpt_path", "callbacks.", "logger.", "tokenizer.cache_dir", "data.cache_dir", "hydra.")


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

    @property
    def seed(self) -> Any:
        return self.config.get("seed")

    @property
    def arm_key(self) -> tuple:
        """Every setting except the seed (and bookkeeping): runs with the same key are replicates."""
        return tuple(sorted((k, repr(v)) for k, v in self.config.items() if not k.startswith(IGNORED)))

    def final(self, metric: str) -> Optional[float]:
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


def read_run(path: Path) -> Run:
    """A run from its directory (which has `.hydra/overrides.yaml`)."""
    from omegaconf import OmegaConf

    try:
        overrides = list(OmegaConf.to_container(OmegaConf.load(path / ".hydra" / "overrides.yaml")))
        config_file = path / ".hydra" / "config.yaml"
        config = OmegaConf.to_container(OmegaConf.load(config_file), resolve=False) if config_file.is_file() else {}
        if not isinstance(config, dict):
            raise ValueError("not a mapping")
    except Exception as exc:  # yaml and OmegaConf raise many types for a damaged file
        reason = " ".join(str(exc).split())[:160]
        return Run(path=path, overrides=[], config={}, status=RunStatus.damaged,
                   error=f"{path / '.hydra'} is damaged ({reason}); run it again or remove the run directory")
    summary, error, status = {}, "", RunStatus.unfinished
    try:
        if (path / "summary.json").is_file():
            summary = read_summary(path / "summary.json")
            if summary.get("status") == "finished":
                status = RunStatus.finished
        if status != RunStatus.finished and (path / FAILED_FILE).is_file():
            status = RunStatus.failed
            error = str(_read_object(path / FAILED_FILE).get("error", ""))
    except DamagedRecord as exc:
        summary, status, error = {}, RunStatus.damaged, str(exc)
    try:
        curve, last_val = read_curve(path / "metrics.csv")
    except (ValueError, KeyError, UnicodeDecodeError, csv.Error) as exc:
        curve, last_val = [], {}
        if status != RunStatus.damaged:
            status, error = RunStatus.damaged, (f"{path / 'metrics.csv'} is damaged ({exc}); run it "
                                                f"again or remove the run directory")
    return Run(path=path, overrides=overrides, config=flatten(config), status=status, summary=summary,
               error=error, curve=curve, last_val=last_val)


class DamagedRecord(ValueError):
    """A run's summary.json or failed.json that is not what zoo-train writes."""


def read_summary(path: Path) -> dict:
    """summary.json as a dict whose `metrics` are numbers (or null); DamagedRecord naming the
    file otherwise."""
    summary = _read_object(path)
    metrics = summary.get("metrics", {})
    if not isinstance(metrics, dict):
        raise DamagedRecord(f"{path} is damaged (its metrics are not a mapping); run it again "
                            f"or remove the run directory")
    for key, value in metrics.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise DamagedRecord(f"{path} is damaged (metric {key!r} is {value!r}, not a number); "
                                f"run it again or remove the run directory")
    return summary


def _read_object(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise DamagedRecord(f"{path} is damaged (not JSON: {exc}); run it again or remove the run "
                            f"directory") from None
    if not isinstance(value, dict):
        raise DamagedRecord(f"{path} is damaged (a JSON {type(value).__name__}, not an object); run it "
                            f"again or remove the run directory")
    return value


def read_curve(metrics_csv: Path) -> tuple[list[tuple[int, float]], dict[str, float]]:
    """(tokens seen, val/loss) at each validation, and the last validation row's metrics."""
    if not metrics_csv.is_file():
        return [], {}
    tokens_at: dict[int, int] = {}
    vals: list[tuple[int, dict[str, float]]] = []
    with metrics_csv.open(newline="") as handle:
        for row in csv.DictReader(handle):
            step = int(float(row["step"])) if row.get("step") else None
            if step is None:
                continue
            if row.get("tokens_seen"):
                tokens_at[step] = max(tokens_at.get(step, 0), int(float(row["tokens_seen"])))
            if row.get("val/loss"):
                vals.append((step, {k: float(v) for k, v in row.items() if k.startswith("val/") and v}))
    curve = [(_tokens_at(tokens_at, step), metrics["val/loss"]) for step, metrics in vals]
    return curve, (vals[-1][1] if vals else {})


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
    found: list[Path] = []
    for root in dirs:
        root = Path(root)
        if (root / ".hydra" / "overrides.yaml").is_file():
            here = [root]
        else:
            here = sorted((p.parent.parent for p in root.rglob(".hydra/overrides.yaml")), key=_natural)
        found.extend(p for p in here if p not in found)
    return [read_run(p) for p in found]


def _natural(path: Path) -> tuple:
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in path.parts)
