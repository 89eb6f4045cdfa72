"""What a job of a sweep returns to Hydra: the run's final `val/loss`, read from its record.

Hydra's Optuna sweeper (`zoo-train -m hydra/sweeper=optuna`) scores each trial by the value the
job returns. zoo returns the number zoo-compare reads for the same run directory
(`zoo.compare.runs.read_run`: `summary.json`'s `metrics` of a finished run), so a trial's score
and its row in the tuned report cannot disagree. A run that did not finish (failed.json: a
refusal, an error, a loss that went non-finite), whose record is damaged, or whose final
`val/loss` is not a finite number returns None: the sweeper cannot turn None into a float and
records the trial as failed (`TrialState.FAIL`), which keeps it out of the sampler's model and
out of the best trial. A stand-in such as `inf` would be a finished trial with the worst score,
and TPE would fit its density to it. The sweep goes on with its other trials, and zoo-train
ends it with one line naming the failed ones and exit status 1, as it ends any sweep."""

from __future__ import annotations

import math
from pathlib import Path

OBJECTIVE = "val/loss"  # minimized: the Optuna sweeper's direction stays its default, minimize


def objective(run_dir: Path) -> float | None:
    """The final `val/loss` of the run in `run_dir` as zoo-compare reads it; None for a run
    that did not finish with a finite one (a failed trial)."""
    from zoo.compare.runs import read_run

    value = read_run(run_dir).final(OBJECTIVE)
    return value if value is not None and math.isfinite(value) else None
