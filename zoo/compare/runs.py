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

    overrides = list(OmegaConf.to_container(OmegaConf.load(path / ".hydra" / "overrides.yaml")))
    config_file = path / ".hydra" / "config.yaml"
    config = OmegaConf.to_container(OmegaConf.load(config_file), resolve=False) if config_file.is_file() else {}
    summary, error, status = {}, "", RunStatus.unfinished
    if (path / "summary.json").is_file():
        summary = json.loads((path / "summary.json").read_text())
        if summary.get("status") == "finished":
            status = RunStatus.finished
    if status != RunStatus.finished and (path / FAILED_FILE).is_file():
        status = RunStatus.failed
        error = json.loads((path / FAILED_FILE).read_text()).get("error", "")
    curve, last_val = read_curve(path / "metrics.csv")
    return Run(path=path, overrides=overrides, config=flatten(config), status=status, summary=summary,
               error=error, curve=curve, last_val=last_val)


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
    curve = [(tokens_at.get(step, 0), metrics["val/loss"]) for step, metrics in vals]
    return curve, (vals[-1][1] if vals else {})


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
