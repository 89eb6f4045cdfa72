"""The end of a run that was not stopped: the final checkpoints and summary.json.

The unigram baseline it reports (`unigram_from_counts`) is the loss of the best model that
ignores context, a context-free reference point for a language model's loss."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from zoo.config.facts.tasks import task_spec
from zoo.config.records.rundir import RunDir, RunSummary
from zoo.config.schema.flops import mtp_flops
from zoo.config.schema.root import ZooConfig
from zoo.data.accounting import split_sizes
from zoo.models.summary import summarize
from zoo.training.callbacks import RunCallbacks
from zoo.training.distributed.fsdp import write_full_checkpoint
from zoo.training.distributed.replicas import replica_agreement
from zoo.training.distributed.strategies import is_sharded
from zoo.training.monitor.sample import sample_prompt, sample_text
from zoo.training.resume.data_files import SUMMARY_KEY as DATA_CHANGED
from zoo.training.resume.point import Resume
from zoo.training.signals import command


@dataclass(frozen=True)
class Requeued:
    """A run SLURM requeued: the step it stopped at and the checkpoint the next job resumes."""

    step: int
    last_checkpoint: Path


@dataclass
class RunResult:
    """What train() returns: the summary as written to summary.json (None for a requeued run,
    which writes none: `requeued` says where it resumes), the trained task, and whether this
    process is rank 0."""

    summary: RunSummary | None
    task: Any  # the trained LightningModule
    is_global_zero: bool = True
    requeued: Requeued | None = None


def finish(
    spec: ZooConfig, run_dir: Path, trainer, task, datamodule, callbacks: RunCallbacks, resume: Resume, wall: float
) -> RunResult:
    """A requeued run reports where it resumes from and writes nothing more. Otherwise: the
    final last.ckpt (and, for a sharded run, full.ckpt), then the summary, written by rank 0,
    which also removes the failed.json of an earlier stop of this run."""
    files, last = RunDir(run_dir), callbacks.last
    if callbacks.requeued:
        return RunResult(
            summary=None,
            task=task,
            is_global_zero=trainer.is_global_zero,
            requeued=Requeued(step=trainer.global_step, last_checkpoint=Path(last.path)),
        )
    command.stage("while the run's records were written")  # a stop from here resumes from the final state
    last.save(trainer)  # the final state, whatever N was
    replicas = replica_agreement(task, trainer)
    full = None
    if is_sharded(trainer.strategy):  # the whole model in one file, for one device
        full = files.full
        if trainer.is_global_zero:
            write_full_checkpoint(last.path, full)
        trainer.strategy.barrier("zoo_full_checkpoint")
    summary = summarize_run(spec, run_dir, trainer, task, datamodule, callbacks, resume, wall, replicas, full)
    with command.holding():  # a stop waits until the records say finished, never half of it
        if trainer.is_global_zero:
            summary.write(run_dir)
            files.failed.unlink(missing_ok=True)  # an earlier stop of this run, now finished
        command.finished()
    return RunResult(summary=summary, task=task, is_global_zero=trainer.is_global_zero)


def summarize_run(
    spec: ZooConfig,
    run_dir: Path,
    trainer,
    task,
    datamodule,
    callbacks: RunCallbacks,
    resume: Resume,
    wall: float,
    replicas: dict,
    full: Path | None,
) -> RunSummary:
    """What the run did: steps, tokens, time, the trainer's last scalar metrics, the model's
    size, whether data-parallel replicas agree (`replicas`, {} when not asked), the checkpoints,
    the tokenizer (kind, size, digest); for a language model the sizes of its splits, for a
    causal LM also the unigram baseline and a sample."""
    import torch

    files, throughput, tokenizer = RunDir(run_dir), callbacks.throughput, datamodule.tokenizer
    model = summarize(task.model, spec.data.seq_len)
    baseline = sample = None
    row = task_spec(spec.task.kind)
    if row.packs and row.generates:  # a causal LM: a unigram baseline of its stream, and a sample
        counts = datamodule.token_counts(tokenizer.vocab_size)
        if counts is not None:  # a stream has no counts of its training tokens
            baseline = unigram_from_counts(*counts)
        prompt = sample_prompt(spec.data, datamodule, tokenizer)
        sample = sample_text(task, tokenizer, prompt) if prompt else None
    metrics: dict[str, float | None] = {
        k: float(v) for k, v in trainer.callback_metrics.items() if torch.is_tensor(v) and v.numel() == 1
    }
    if callbacks.instability is not None:  # its values of the last step (logged at their own steps)
        metrics.update(callbacks.instability.last)
    if callbacks.routing is not None:  # the mixture layers' routing of the last step measured
        metrics.update(callbacks.routing.last)
    if callbacks.downstream is not None:  # task scores at the last step (scored now unless they were)
        metrics.update(callbacks.downstream.final(trainer, task))
    return RunSummary(
        run_dir=str(run_dir),
        status="finished",
        task=spec.task.kind.value,
        family=spec.model.family.value,
        position=spec.model.position.kind.value,
        global_step=trainer.global_step,
        tokens_seen=int(task.tokens_seen),
        train_seconds=round(throughput.train_seconds, 3),
        tokens_per_s=round(throughput.tokens / throughput.train_seconds, 1) if throughput.train_seconds else None,
        wall_seconds=round(wall, 3),
        metrics=metrics,
        prepared_data=str(datamodule.prepared.directory) if datamodule.prepared is not None else None,
        tokenizer={"kind": tokenizer.kind, "vocab_size": tokenizer.vocab_size, "digest": tokenizer.digest()},
        data=_with_measured(split_sizes(datamodule), task),
        model=model.as_dict(),
        train_flops_per_token=model.flops_per_token + mtp_flops(spec.model, spec.task.mtp_depth, spec.data.seq_len),
        baseline=baseline,
        sample=sample,
        init_from=spec.init_from,  # the pretrained weights, unless resumed_from is set
        resumed_from=resume.path,
        resumed_at_step=resume.step,
        branched_from=resume.branched_from,
        nonfinite_skipped=int(task.nonfinite_skipped),
        world_size=trainer.world_size,
        replicas_identical=replicas.get("replicas_identical"),
        replica_max_fingerprint_diff=replicas.get("replica_max_fingerprint_diff"),
        best_checkpoint=trainer.checkpoint_callback.best_model_path or None,
        last_checkpoint=str(files.last) if files.last.exists() else None,
        full_checkpoint=str(full) if full is not None else None,
        extra={DATA_CHANGED: list(resume.data_changed)} if resume.data_changed else {},
    )


def _with_measured(sizes, task):
    """The split sizes, with the validation tokens the last val/loss was measured on
    (`val_tokens_measured`: trainer.limit_val_batches may stop before the split's end)."""
    if sizes is None:
        return None
    return {**sizes, "val_tokens_measured": getattr(task.val_loss, "counted", None)}


def unigram_from_counts(train_counts, val_counts) -> dict:
    """The loss (nats/token) of the best model that ignores context: the unigram frequencies of
    the training split (add-one smoothed over the vocabulary), scored on the validation split,
    from how often each id occurs in each ([V] each); and the entropy of that distribution."""
    counts = torch.as_tensor(train_counts).double() + 1.0
    val = torch.as_tensor(val_counts).double()
    p = counts / counts.sum()
    entropy = float(-(p * p.log()).sum())
    cross_entropy = float(-(val * p.log()).sum() / val.sum())
    return {"unigram_entropy": entropy, "unigram_val_loss": cross_entropy}
