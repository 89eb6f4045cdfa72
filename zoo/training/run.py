"""One training run from a composed config: validate, build data, task and trainer, fit,
write the run directory (config.yaml, checkpoints/, metrics.csv, tb/, summary.json)."""

from __future__ import annotations

import json
import logging
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from zoo.training.checkpoint.files import CheckpointError, read_checkpoint
from zoo.config.convert import plain
from zoo.config.errors import ConfigError
from zoo.config.root import ZooConfig
from zoo.config.validate import validate
from zoo.interop.hf.init_from import apply_init_from, init_path
from zoo.config.positions import max_positions
from zoo.config.train import NonFinitePolicy, OutputLoss, ProgressBar, TaskKind


log = logging.getLogger("zoo")


def check_machine(spec: ZooConfig) -> None:
    """What this machine must have for the run (`zoo.config.validate` checks the config alone):
    a GPU when the trainer asks for one, the packages of the options chosen."""
    import importlib.util

    import torch

    if spec.logger.tensorboard and not any(importlib.util.find_spec(m) for m in ("tensorboard", "tensorboardX")):
        raise ConfigError("logger.tensorboard=true needs tensorboard: pip install tensorboard")

    accelerator = str(spec.trainer.get("accelerator", "auto"))
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(f"trainer.accelerator={accelerator} asks for a GPU and this machine has none "
                          f"(torch sees no CUDA device); add trainer=cpu (or trainer=ddp_cpu) to run it "
                          f"on the CPU")
    if spec.task.output_loss == OutputLoss.liger:
        if accelerator in ("cpu", "mps") or not torch.cuda.is_available():
            raise ConfigError("task.output_loss=liger runs Triton kernels on a CUDA GPU, and this run has "
                              "none; use task.output_loss=auto")
        if importlib.util.find_spec("liger_kernel") is None:
            raise ConfigError("task.output_loss=liger needs liger-kernel (pip install '.[liger]' in zoo's "
                              "source directory)")


def command_line_overrides() -> list[str]:
    """The overrides of the running Hydra job (`zoo-train a=b ...`); none outside Hydra."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def init_weights(task, init_from: str) -> None:
    """Load init_from's pretrained weights into the task's model (before fit); a head the task
    adds (a classifier) keeps its fresh initialisation."""
    from zoo.interop.hf.pretrained import load_weights

    path = init_path(init_from)
    skipped = load_weights(task.model, path)
    log.info("init_from: the model starts from the weights in %s", path)
    if skipped:
        log.info("init_from: %d pretrained tensor(s) the %s task has no place for are not loaded (%s); "
                 "its own head starts freshly initialised", len(skipped), task.task_config.kind.value,
                 ", ".join(skipped[:4]) + (", ..." if len(skipped) > 4 else ""))


def resolve_resume(ckpt_path: Optional[str], run_dir: Path) -> Optional[str]:
    """'last' -> the run dir's last.ckpt (must exist); None -> last.ckpt if the run dir already
    has one (rerunning a command in its run dir continues it); a path must exist and be a
    readable checkpoint."""
    last = run_dir / "checkpoints" / "last.ckpt"
    if ckpt_path is None:
        path = last if last.exists() else None
    else:
        path = last if ckpt_path == "last" else Path(ckpt_path)
        if not path.exists():
            raise CheckpointError(f"ckpt_path={ckpt_path}: {path} does not exist")
    if path is None:
        return None
    read_checkpoint(path, weights=False)  # refuses truncated files and files holding code
    return str(path)


def check_resume_config(resume: str, spec: ZooConfig) -> None:
    """The command must describe the run its checkpoint holds (`zoo.training.resume_check`)."""
    from zoo.training.resume_check import check_resume, saved_sections

    hparams = read_checkpoint(resume, weights=False).get("hyper_parameters", {})
    command = {"model": spec.model.to_dict(), "task": plain(spec.task), "optim": plain(spec.optim),
               "scheduler": plain(spec.scheduler), "data": spec.data.to_dict(),
               "tokenizer": {"kind": spec.tokenizer.kind.value}}
    check_resume(saved_sections(hparams), command, f"the checkpoint {resume}")


def check_resume_strategy(resume: Optional[str], strategy) -> None:
    """A sharded checkpoint (trainer=fsdp) resumes under the sharded strategy only, on any
    number of ranks; a single-file one resumes under any strategy."""
    from zoo.training.checkpoint.files import is_sharded_checkpoint
    from zoo.training.strategies import is_sharded

    if resume is not None and is_sharded_checkpoint(resume) and not is_sharded(strategy):
        raise CheckpointError(
            f"{resume} is a sharded checkpoint (written by trainer=fsdp): resume it with trainer=fsdp "
            f"(on any number of devices); zoo-eval, zoo-generate and zoo-export read it on one device")


SAMPLE_PROMPT = "And God said"


def sample_text(task, tokenizer, prompt: str, max_new_tokens: int = 40) -> str:
    """A greedy continuation of `prompt`, to see what a causal LM has learnt."""
    import torch

    from zoo.models.generate import generate

    ids = torch.tensor([tokenizer.encode(prompt)], device=task.device)
    cfg = task.model_config
    bound = max_positions(cfg)
    if bound is not None:
        max_new_tokens = min(max_new_tokens, bound - ids.shape[1])
        if max_new_tokens < 1:
            return prompt
    was_training = task.training
    task.eval()
    out = generate(task.model, ids, max_new_tokens=max_new_tokens, eos_id=tokenizer.special_ids()["eos"],
                   vocab_limit=tokenizer.vocab_size)
    task.train(was_training)
    from zoo.data.prompts import continue_text

    return continue_text(tokenizer, prompt, out[0].tolist())


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


def _first_process() -> bool:
    """Rank 0, or the process that will start the ranks (no launcher's rank variables)."""
    import os

    return all(os.environ.get(v, "0") in ("", "0") for v in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "NODE_RANK"))


class TrainingStopped(RuntimeError):
    """Training could not go on (e.g. a non-finite loss); what was saved before is kept."""


class TrainingInterrupted(RuntimeError):
    """SIGTERM / SIGINT stopped the run at `step` after saving `checkpoint`."""

    def __init__(self, signum: int, step: int, checkpoint: Path) -> None:
        import signal as _signal

        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        super().__init__(f"stopped by {_signal.Signals(signum).name} at step {step}; {checkpoint} holds it")


@dataclass
class RunResult:
    summary: dict  # also in run_dir/summary.json
    task: Any  # the trained LightningModule
    is_global_zero: bool = True


def train(cfg: DictConfig, run_dir: Path) -> RunResult:
    """Run training; the summary is also written to run_dir/summary.json."""
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
    from lightning.pytorch.loggers import TensorBoardLogger
    from lightning.pytorch.plugins.environments import SLURMEnvironment
    from lightning.pytorch.utilities.exceptions import MisconfigurationException

    from zoo.data import build_datamodule, check_vocab, per_device_batch
    from zoo.models.summary import summarize
    from zoo.tasks import TASKS
    from zoo.tasks.base import NonFiniteLoss
    from zoo.training.callbacks import LastValidation, Throughput
    from zoo.training.progress import StepRichProgressBar, StepTQDMProgressBar
    from zoo.training.checkpoint.saving import AtomicCheckpointIO, LastCheckpoint, RunRecord
    from zoo.training.preemption import Requeue, in_slurm_job
    from zoo.training.replicas import replica_agreement
    from zoo.training.rng import RngState
    from zoo.training.baseline import unigram_from_counts
    from zoo.training.loggers import RunCSVLogger
    from zoo.training.fsdp import recover_sharded, write_full_checkpoint
    from zoo.training.interrupt import Interrupt
    from zoo.training.strategies import build_strategy, is_sharded

    cfg = apply_init_from(cfg, command_line_overrides())  # init_from=hf:DIR: DIR's model and tokenizer
    spec = validate(cfg)
    check_machine(spec)
    if _first_process():
        for note in recover_sharded(run_dir / "checkpoints"):  # before looking for last.ckpt
            log.info("%s", note)
    resume = resolve_resume(spec.ckpt_path, run_dir)
    check_resume_strategy(resume, spec.trainer.get("strategy"))
    if resume is not None:
        check_resume_config(resume, spec)
    quiet_lightning()
    L.seed_everything(spec.seed, workers=True, verbose=False)
    run_dir.mkdir(parents=True, exist_ok=True)

    ckpt_dir = run_dir / "checkpoints"
    last = LastCheckpoint(ckpt_dir, spec.callbacks.checkpoint_every_n_steps)
    callbacks = [
        # top-k by validation loss, checked after every validation
        ModelCheckpoint(
            dirpath=ckpt_dir,
            filename="best-{step}",
            monitor="val/loss",
            mode="min",
            save_top_k=spec.callbacks.save_top_k,
            auto_insert_metric_name=False,
        ),
        last,  # last.ckpt every N optimizer steps and at every epoch end (and when fit ends, below)
        RngState(),
        RunRecord(run_dir),
        (interrupt := Interrupt(last)),  # SIGTERM / SIGINT: save at the next step, stop
        LearningRateMonitor(logging_interval="step"),
        Throughput(),
        LastValidation(),
    ]
    requeue = None
    plugins: list = [AtomicCheckpointIO()]
    if SLURMEnvironment.detect():
        # zoo saves and requeues itself (Requeue); Lightning's handler would save from inside
        # the signal handler
        plugins.append(SLURMEnvironment(auto_requeue=False))
        if spec.callbacks.requeue_signal and in_slurm_job():
            requeue = Requeue(last, signum=getattr(signal, spec.callbacks.requeue_signal))
            callbacks.append(requeue)
    if spec.callbacks.progress_bar == ProgressBar.rich:
        callbacks.append(StepRichProgressBar(leave=True))
    elif spec.callbacks.progress_bar == ProgressBar.tqdm:
        callbacks.append(StepTQDMProgressBar())
    loggers = []
    resume_step = read_checkpoint(resume, weights=False).get("global_step") if resume else None
    if spec.logger.csv:
        loggers.append(RunCSVLogger(str(run_dir), resume_step=resume_step))
    if spec.logger.tensorboard:
        loggers.append(TensorBoardLogger(save_dir=str(run_dir), name="tb", version=""))

    trainer_args = dict(spec.trainer)
    trainer_args["strategy"] = build_strategy(trainer_args.get("strategy", "auto"))
    trainer_args.setdefault("enable_progress_bar", spec.callbacks.progress_bar != ProgressBar.none)
    extra_plugins = trainer_args.pop("plugins", None) or []
    try:
        trainer = L.Trainer(
            **trainer_args,
            default_root_dir=str(run_dir),
            callbacks=callbacks,
            logger=loggers or False,
            plugins=plugins + list(extra_plugins if isinstance(extra_plugins, list) else [extra_plugins]),
        )
    except (TypeError, ValueError, MisconfigurationException) as exc:  # Lightning's checks of its arguments
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if ("gpu backend" in first.lower() or "cuda" in first.lower()) and not torch.cuda.is_available():
            accelerator = trainer_args.get("accelerator")
            raise ConfigError(f"trainer.accelerator={accelerator} asks for a GPU and this machine has none "
                              f"(torch sees no CUDA device); add trainer=cpu (or trainer=ddp_cpu) to run "
                              f"it on the CPU") from None
        raise ConfigError(f"trainer: {first}") from None

    # the per-device batch and accumulation derive from the world size the Trainer resolved
    device_batch, accumulation = per_device_batch(
        spec.data.global_batch_size, trainer.world_size, spec.data.max_device_batch_size
    )
    trainer.accumulate_grad_batches = accumulation
    if getattr(trainer.strategy, "replicated_validation", False) and isinstance(trainer.limit_val_batches, int):
        # every rank validates on every example: the same examples as trainer.limit_val_batches
        # batches on each of the ranks of a data-parallel run
        trainer.limit_val_batches *= trainer.world_size
    if accumulation > 1 and spec.task.on_nonfinite_loss == NonFinitePolicy.skip:
        raise ConfigError(
            f"task.on_nonfinite_loss=skip needs one micro-batch per optimizer step, but "
            f"data.global_batch_size={spec.data.global_batch_size} over {trainer.world_size} device(s) "
            f"with data.max_device_batch_size={spec.data.max_device_batch_size} accumulates "
            f"{accumulation}; raise data.max_device_batch_size or use on_nonfinite_loss=stop")
    datamodule = build_datamodule(
        spec.data, spec.tokenizer, spec.task.kind.value, batch_size=device_batch, seed=spec.seed
    )
    datamodule.setup("fit")
    tokenizer = datamodule.tokenizer
    if datamodule.prepared is not None:
        index = datamodule.prepared.index["splits"]
        log.info("prepared data: %s (%s; %d training tokens, %d validation tokens)", datamodule.prepared.directory,
                 "built by this process" if datamodule.prepared.built else "found in the cache",
                 index["train"]["tokens"], index["validation"]["tokens"])
    check_vocab(spec.model.vocab_size, tokenizer)

    extra = {
        "special_ids": tokenizer.special_ids(),
        "tokenizer_kind": spec.tokenizer.kind.value,
        "data": spec.data.to_dict(),  # zoo-eval's default dataset
    }
    labels = getattr(datamodule, "labels", None)
    if labels:
        extra["labels"] = list(labels)
    task = TASKS[spec.task.kind](
        model=spec.model.to_dict(),
        task=plain(spec.task),
        optim=plain(spec.optim),
        scheduler=plain(spec.scheduler),
        extra=extra,
    )
    task.tokenizer = tokenizer
    if spec.init_from is not None and resume is None:
        init_weights(task, spec.init_from)
    elif spec.init_from is not None:
        log.info("init_from: resuming from %s, whose weights win over %s", resume, spec.init_from)

    if trainer.is_global_zero:
        log.info("model: %s", summarize(task.model, spec.data.seq_len))
        (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
        tokenizer.save(run_dir / "tokenizer")
        log.info("run directory: %s", run_dir)

    start = time.perf_counter()
    try:
        trainer.fit(task, datamodule=datamodule, ckpt_path=resume, weights_only=True)
    except NonFiniteLoss as exc:
        kept = f"the last good checkpoint is {last.path} (step {read_checkpoint(last.path, weights=False)['global_step']})" \
            if last.path.exists() \
            else "no checkpoint had been written yet"
        raise TrainingStopped(
            f"{exc}; training stopped, {kept}; lower optim.lr, keep "
            f"trainer.gradient_clip_val, or set task.on_nonfinite_loss=skip") from None
    if interrupt.stopped_at is not None:
        raise TrainingInterrupted(interrupt.signum, interrupt.stopped_at, last.path)
    final = next(c for c in callbacks if isinstance(c, LastValidation))
    if final.needed(trainer) and not (requeue is not None and requeue.requeued):
        # the run ended between validations: its summary reports the weights it ends with
        log.info("validating the final step %d (the last validation was at step %s)", trainer.global_step, final.step)
        # logged at the step a validation inside fit would use for this step (one less than
        # the count of finished steps), so metrics.csv reads the same either way
        loop = trainer.fit_loop.epoch_loop
        loop._batches_that_stepped -= 1
        try:
            trainer.validate(task, datamodule=datamodule, verbose=False)
        finally:
            loop._batches_that_stepped += 1
    wall = time.perf_counter() - start
    if requeue is not None and requeue.requeued:
        summary = {"run_dir": str(run_dir), "status": "requeued", "global_step": trainer.global_step,
                   "last_checkpoint": str(last.path)}
        return RunResult(summary=summary, task=task, is_global_zero=trainer.is_global_zero)
    last.save(trainer)  # the final state, whatever N was
    replicas = replica_agreement(task, trainer)
    full = None
    if is_sharded(trainer.strategy):  # the whole model in one file, for one device
        full = ckpt_dir / "full.ckpt"
        if trainer.is_global_zero:
            write_full_checkpoint(last.path, full)
        trainer.strategy.barrier("zoo_full_checkpoint")

    throughput = next(c for c in callbacks if isinstance(c, Throughput))
    extras = {}
    if spec.task.kind == TaskKind.causal_lm:
        counts = datamodule.token_counts(tokenizer.vocab_size)
        if counts is not None:  # a stream has no counts of its training tokens
            extras["baseline"] = unigram_from_counts(*counts)
        extras["sample"] = sample_text(task, tokenizer, SAMPLE_PROMPT)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if torch.is_tensor(v) and v.numel() == 1}
    tokens = int(task.tokens_seen)
    summary = {
        "run_dir": str(run_dir),
        "status": "finished",
        "task": spec.task.kind.value,
        "family": spec.model.family.value,
        "position": spec.model.position.kind.value,
        "global_step": trainer.global_step,
        "tokens_seen": tokens,
        "train_seconds": round(throughput.train_seconds, 3),
        "tokens_per_s": round(throughput.tokens / throughput.train_seconds, 1) if throughput.train_seconds else None,
        "wall_seconds": round(wall, 3),
        "metrics": metrics,
        "prepared_data": str(datamodule.prepared.directory) if datamodule.prepared is not None else None,
        "model": summarize(task.model, spec.data.seq_len).as_dict(),
        **extras,
        "init_from": spec.init_from,  # the pretrained weights, unless resumed_from is set
        "resumed_from": resume,
        "resumed_at_step": resume_step,
        "nonfinite_skipped": int(task.nonfinite_skipped),
        "world_size": trainer.world_size,
        **replicas,
        "best_checkpoint": trainer.checkpoint_callback.best_model_path or None,
        "last_checkpoint": str(ckpt_dir / "last.ckpt") if (ckpt_dir / "last.ckpt").exists() else None,
        "full_checkpoint": str(full) if full is not None else None,
    }
    if trainer.is_global_zero:
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        (run_dir / "failed.json").unlink(missing_ok=True)  # an earlier stop of this run, now finished
    return RunResult(summary=summary, task=task, is_global_zero=trainer.is_global_zero)
