"""Lightning's log output, trimmed to what a zoo user needs to read."""

from __future__ import annotations

import logging


def quiet_lightning() -> None:
    """One copy of each log line (Hydra's handlers), no advertising tips, no warnings about
    Lightning's own internals."""
    import warnings

    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(
        lambda record: "litlogger" not in record.getMessage()
    )
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    # a streamed training loader (data.streaming) has a nominal length and no workers by design
    warnings.filterwarnings("ignore", message=".*`IterableDataset` has `__len__` defined.*")
    # on a SLURM login node a local run is intended; sbatch / hydra/launcher=slurm use srun
    warnings.filterwarnings("ignore", message=".*The `srun` command is available on your system.*")
    # a run directory is the run's own (claimed and locked): a resume finds its checkpoints there
    warnings.filterwarnings("ignore", message=".*Checkpoint directory .* exists and is not empty.*")
    # zoo counts steps, not epochs: a small corpus's short epoch logs on the global step as usual
    warnings.filterwarnings("ignore", message=".*is smaller than the logging interval.*")
