"""Checkpoints: reading and rebuilding them (`files`), writing them atomically and on schedule
during training (`saving`)."""
