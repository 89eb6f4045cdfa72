"""The parts a training run is built from, each from the validated config: the Lightning Trainer
(the config's trainer section with zoo's plugins; its own argument checks reported as one
ConfigError line), the LightningModule of the task (its model, the tokenizer the data was
encoded with and, for init_from, pretrained weights), and the data module set up for fitting
with the per-device batch (`split_batch`: the global batch split over the devices the Trainer
resolved). The callbacks are `zoo.training.callbacks`'."""

from __future__ import annotations

import logging
from contextlib import nullcontext
from pathlib import Path

from zoo.config.errors import ConfigError
from zoo.config.records.hparams import to_hparams
from zoo.config.schema.root import ZooConfig
from zoo.config.schema.task import NonFinitePolicy
from zoo.config.schema.train import ProgressBar
from zoo.config.schema.trainer import REPLICATE_KEY, is_sharded_name
from zoo.data import build_datamodule, check_vocab, per_device_batch
from zoo.interop.hf.init_from import init_path
from zoo.interop.hf.pretrained import load_weights
from zoo.models.init import parameters_on_meta
from zoo.tasks import TASKS
from zoo.training.checkpoint.saving import AtomicCheckpointIO
from zoo.training.distributed.strategies import build_strategy

log = logging.getLogger("zoo")


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


def init_weights(task, init_from: str) -> None:
    """Load init_from's pretrained weights into the task's model (before fit); a head the task
    adds (a classifier) keeps its fresh initialisation."""
    path = init_path(init_from)
    skipped = load_weights(task.model, path)
    log.info("init_from: the model starts from the weights in %s", path)
    if skipped:
        log.info(
            "init_from: %d pretrained tensor(s) the %s task has no place for are not loaded (%s); "
            "its own head starts freshly initialised",
            len(skipped),
            task.task_config.kind.value,
            ", ".join(skipped[:4]) + (", ..." if len(skipped) > 4 else ""),
        )


def build_task(spec: ZooConfig, datamodule, resume: str | None):
    """The task, carrying what zoo-eval and zoo-generate need later (special ids, tokenizer
    kind, dataset, class labels) in its hyperparameters. init_from's weights are loaded only on
    a fresh start: a resumed run's checkpoint holds newer ones.

    Under trainer=fsdp (or hsdp) the task is built on the meta device (no weights: `zoo.models.init`) and
    each rank gets its rows of them when it is sharded; with init_from it is built whole, to
    load the pretrained weights first."""
    tokenizer = datamodule.tokenizer
    labels = getattr(datamodule, "labels", None)
    hparams = to_hparams(spec, special_ids=tokenizer.special_ids(), labels=list(labels) if labels else None)
    on_meta = is_sharded_name(spec.trainer.get("strategy")) and spec.init_from is None
    with parameters_on_meta() if on_meta else nullcontext():
        task = TASKS[spec.task.kind](**hparams)
    task.tokenizer = tokenizer
    if spec.init_from is not None and resume is None:
        init_weights(task, spec.init_from)
    elif spec.init_from is not None:
        log.info("init_from: resuming from %s, whose weights win over %s", resume, spec.init_from)
    return task


def build_data(spec: ZooConfig, device_batch: int):
    """The LightningDataModule, set up ("fit"): its tokenizer trained or loaded, its splits
    made (prepared token shards are reported: where, and whether this process built them); the
    model's vocabulary must hold the tokenizer's. The training order is seeded by
    data.order_seed, by seed when it is unset."""
    order = spec.data.order_seed if spec.data.order_seed is not None else spec.seed  # data order: its own seed
    datamodule = build_datamodule(spec.data, spec.tokenizer, spec.task.kind.value, batch_size=device_batch, seed=order)
    log.info(
        "preparing the data: tokenizer=%s (trained or read from the cache), the corpus tokenized",
        spec.tokenizer.kind.value,
    )
    datamodule.setup("fit")
    if datamodule.prepared is not None:
        index = datamodule.prepared.index["splits"]
        log.info(
            "prepared data: %s (%s; %d training tokens, %d validation tokens)",
            datamodule.prepared.directory,
            "built by this process" if datamodule.prepared.built else "found in the cache",
            index["train"]["tokens"],
            index["validation"]["tokens"],
        )
    check_vocab(spec.model.vocab_size, datamodule.tokenizer, spec.init_from)
    return datamodule


def split_batch(spec: ZooConfig, trainer) -> int:
    """The per-device batch; sets the trainer's gradient accumulation (the rest of
    data.global_batch_size)."""
    # the per-device batch and accumulation derive from the world size the Trainer resolved
    device_batch, accumulation = per_device_batch(
        spec.data.global_batch_size, trainer.world_size, spec.data.max_device_batch_size
    )
    trainer.accumulate_grad_batches = accumulation
    if accumulation > 1 and spec.task.on_nonfinite_loss == NonFinitePolicy.skip:
        raise ConfigError(
            f"task.on_nonfinite_loss=skip needs one micro-batch per optimizer step, but "
            f"data.global_batch_size={spec.data.global_batch_size} over {trainer.world_size} device(s) "
            f"with data.max_device_batch_size={spec.data.max_device_batch_size} accumulates "
            f"{accumulation}; raise data.max_device_batch_size or use on_nonfinite_loss=stop"
        )
    return device_batch
