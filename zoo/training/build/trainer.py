"""The Lightning Trainer of a run, from the config's trainer section, with zoo's plugins; its
own argument checks are reported as one ConfigError line."""

from __future__ import annotations

from pathlib import Path

from zoo.config.errors import ConfigError
from zoo.config.schema.root import ZooConfig
from zoo.config.schema.train import ProgressBar
from zoo.config.schema.trainer import REPLICATE_KEY
from zoo.training.checkpoint.saving import AtomicCheckpointIO
from zoo.training.distributed.strategies import build_strategy


def build_plugins() -> list:
    """Atomic checkpoint writes; under SLURM, Lightning's SLURM environment without its own
    requeue (zoo saves and requeues itself, `zoo.training.signals.preemption`; Lightning's handler
    would save from inside the signal handler)."""
    from lightning.pytorch.plugins.environments import SLURMEnvironment

    plugins: list = [AtomicCheckpointIO()]
    if SLURMEnvironment.detect():
        plugins.append(SLURMEnvironment(auto_requeue=False))
    return plugins


def build_trainer(spec: ZooConfig, run_dir: Path, callbacks: list, loggers: list):
    """`L.Trainer(**spec.trainer)` writing into `run_dir`: the strategy built from its name,
    zoo's plugins first, then any the config adds."""
    import lightning as L
    import torch
    from lightning.pytorch.utilities.exceptions import MisconfigurationException

    trainer_args = dict(spec.trainer)
    replicate = trainer_args.pop(REPLICATE_KEY, None)  # zoo's own key (hsdp), not the Trainer's
    trainer_args["strategy"] = build_strategy(trainer_args.get("strategy", "auto"), replicate)
    trainer_args.setdefault("enable_progress_bar", spec.callbacks.progress_bar != ProgressBar.none)
    extra_plugins = trainer_args.pop("plugins", None) or []
    plugins = build_plugins() + list(extra_plugins if isinstance(extra_plugins, list) else [extra_plugins])
    try:
        return L.Trainer(
            **trainer_args,
            default_root_dir=str(run_dir),
            callbacks=callbacks,
            logger=loggers or False,
            plugins=plugins,
        )
    except (TypeError, ValueError, MisconfigurationException) as exc:  # Lightning's checks of its arguments
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if ("gpu backend" in first.lower() or "cuda" in first.lower()) and not torch.cuda.is_available():
            accelerator = trainer_args.get("accelerator")
            raise ConfigError(
                f"trainer.accelerator={accelerator} asks for a GPU and this machine has none "
                f"(torch sees no CUDA device); add trainer=cpu (or trainer=ddp_cpu) to run "
                f"it on the CPU"
            ) from None
        raise ConfigError(f"trainer: {first}") from None
