"""Sweep comparison: read the run directories of one or more sweeps (finished or not), group
runs into arms (same config but the seed), and write `report.md`, `report.csv`, `runs.csv` (every
run: `zoo.compare.table`), `curves.png` and `final.png`; `zoo.compare.recompute` rebuilds a
report from its runs.csv. `zoo-compare` is the command line; `compare(dirs, out)` the Python entry, and
`compare_tuned(dirs, out, key=...)` compares each arm at its own best value of one key (tune=),
`compare_scaled(dirs, out, key=...)` each arm across model sizes (scale=)."""

from zoo.compare.report import Arm, Report, compare
from zoo.compare.runs import Run, RunStatus, find_runs
from zoo.compare.scale import ScaleReport, compare_scaled
from zoo.compare.tune import TunedReport, compare_tuned

__all__ = [
    "Arm",
    "Report",
    "Run",
    "RunStatus",
    "ScaleReport",
    "TunedReport",
    "compare",
    "compare_scaled",
    "compare_tuned",
    "find_runs",
]
