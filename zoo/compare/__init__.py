"""Sweep comparison: read the run directories of one or more sweeps (finished or not), group
runs into arms (same config but the seed), and write `report.md`, `report.csv`, `curves.png`
and `final.png`. `zoo-compare` is the command line; `compare(dirs, out)` the Python entry."""

from zoo.compare.report import Arm, Report, compare
from zoo.compare.runs import Run, RunStatus, find_runs

__all__ = ["Arm", "Report", "Run", "RunStatus", "compare", "find_runs"]
