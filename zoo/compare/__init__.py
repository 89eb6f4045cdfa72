"""Sweep comparison: read the run directories of one or more sweeps (finished or not), group
runs into arms (same config but the seed), and write `report.md`, `report.csv`, `curves.png`
and `final.png`. `zoo-compare` is the command line; `compare(dirs, out)` the Python entry, and
`compare_tuned(dirs, out, key=...)` compares each arm at its own best value of one key (tune=)."""

from zoo.compare.report import Arm, Report, compare
from zoo.compare.runs import Run, RunStatus, find_runs
from zoo.compare.tune import TunedReport, compare_tuned

__all__ = ["Arm", "Report", "Run", "RunStatus", "TunedReport", "compare", "compare_tuned", "find_runs"]
