"""The LightningModule of a run: the task the config names, its model, the tokenizer the data
was encoded with, and (for init_from) pretrained weights."""

from __future__ import annotations

import logging
from contextlib import nullcontext

from zoo.config.records.checkpoint_extras import CheckpointExtras
from zoo.config.schema.convert import plain
from zoo.config.schema.root import ZooConfig
from zoo.config.schema.trainer import is_sharded_name
from zoo.interop.hf.init_from import init_path
from zoo.interop.hf.pretrained import load_weights
from zoo.models.init import parameters_on_meta
from zoo.tasks import TASKS

log = logging.getLogger("zoo")


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
    extras = CheckpointExtras(
        tokenizer_kind=spec.tokenizer.kind.value,
        special_ids=tokenizer.special_ids(),
        data=spec.data.to_dict(),
        labels=list(labels) if labels else None,
    )
    on_meta = is_sharded_name(spec.trainer.get("strategy")) and spec.init_from is None
    with parameters_on_meta() if on_meta else nullcontext():
        task = TASKS[spec.task.kind](
            model=spec.model.to_dict(),
            task=plain(spec.task),
            optim=plain(spec.optim),
            scheduler=plain(spec.scheduler),
            extra=extras.to_dict(),
        )
    task.tokenizer = tokenizer
    if spec.init_from is not None and resume is None:
        init_weights(task, spec.init_from)
    elif spec.init_from is not None:
        log.info("init_from: resuming from %s, whose weights win over %s", resume, spec.init_from)
    return task
