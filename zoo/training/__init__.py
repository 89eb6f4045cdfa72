"""Training runs: the Lightning Trainer around a task, its callbacks, strategies, checkpoints and
run records (`run.train` is the entry point)."""
