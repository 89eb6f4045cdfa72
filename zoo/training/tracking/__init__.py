"""What a run reports to whoever watches it: metrics.csv and TensorBoard (`loggers`), the
experiment trackers MLflow and W&B (`experiment_trackers`, `settings`), and the run's identity
and summary as the trackers see them (`identity`)."""
