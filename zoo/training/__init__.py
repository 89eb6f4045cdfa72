"""Training runs: the Lightning Trainer around a task, its callbacks, strategies, checkpoints and
run records (`fit.fit_run` is the entry point; `zoo.train` claims a run and calls it)."""
