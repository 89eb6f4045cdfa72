"""What rank 0 writes into the run directory before training: the resolved config and the
tokenizer (so the directory describes the run even if it never finishes)."""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from zoo.config.root import ZooConfig
from zoo.config.rundir import RunDir
from zoo.models.summary import summarize

log = logging.getLogger("zoo")


def record_start(cfg: DictConfig, spec: ZooConfig, run_dir: Path, task, trainer) -> None:
    """Log the model's size, write config.yaml (resolved) and tokenizer/ (rank 0 only)."""
    if not trainer.is_global_zero:
        return
    files = RunDir(run_dir)
    log.info("model: %s", summarize(task.model, spec.data.seq_len))
    files.config.write_text(OmegaConf.to_yaml(cfg, resolve=True))
    task.tokenizer.save(files.tokenizer)
    log.info("run directory: %s", run_dir)
