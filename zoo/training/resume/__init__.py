"""Continuing a run exactly: which checkpoint it resumes (`point`), whether the command describes
the run that checkpoint holds (`match`), and the random number generators of every rank (`rng`)."""
