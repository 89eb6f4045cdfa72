"""Evaluate a checkpoint on any dataset the data layer reads, with the task's own validation
metrics (loss, perplexity, token accuracy; bits per byte for causal LM and seq2seq; BLEU and
exact match for seq2seq; accuracy for classification)."""

from __future__ import annotations

from typing import Any

from zoo.config.errors import ConfigError
from zoo.config.facts.tasks import task_spec
from zoo.data import build_datamodule
from zoo.data.even_batches import EvenBatches
from zoo.training.quiet import quiet_lightning


def evaluate(
    task,
    data: dict[str, Any],
    *,
    split: str = "validation",
    batch_size: int = 32,
    limit_batches: int | None = None,
    accelerator: str = "cpu",
    devices: int = 1,
) -> dict:
    """Run the task's validation loop over `split` of `data` (a DataConfig dict). Returns
    {"metrics": {...}, ...} with what was evaluated beside the split's size, each labelled
    (`limit_batches` evaluates a part of the split): `batches_evaluated` (per device),
    `examples_evaluated`, `tokens_evaluated` (the targets the loss averages over) and
    `split_examples`. Under several devices the metrics are reduced across ranks by torchmetrics."""
    import lightning as L

    if split not in ("validation", "train"):
        raise ConfigError(f"split={split!r} is not allowed; choose one of: validation, train")
    if split == "train" and data.get("streaming"):  # a stream has windows, not a split of known size
        raise ConfigError(
            "split=train: the data is streamed (data.streaming=true), a stream has no training split to "
            "evaluate; add data.streaming=false to evaluate the same files prepared (split by data.val_fraction)"
        )
    kind = task.task_config.kind.value
    # the checkpoint's tokenizer, never a new one
    tokenizer = task.tokenizer if task.tokenizer is not None else {"kind": task.extras.tokenizer_kind}
    datamodule = build_datamodule(data, tokenizer, kind, batch_size=batch_size, seed=0)
    datamodule.setup("fit")
    labels = getattr(datamodule, "labels", None)
    if "label_column" in task_spec(kind).columns and list(labels or []) != list(task.labels):  # a label per row
        raise ConfigError(f"the data's labels {list(labels or [])} differ from the checkpoint's {task.labels}")
    loader = (
        datamodule.val_dataloader()
        if split == "validation"
        else datamodule._loader(datamodule.train_dataset, train=False)
    )
    if devices not in (1, "1"):  # several processes: as many batches on each (a rank may have no example)
        loader = EvenBatches(loader)
    quiet_lightning()
    trainer = L.Trainer(
        accelerator=accelerator,
        devices=devices,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=limit_batches if limit_batches is not None else 1.0,
    )
    results = trainer.validate(task, dataloaders=loader, verbose=False)
    metrics = {k.split("/", 1)[-1]: float(v) for k, v in (results[0] if results else {}).items()}
    whole = len(loader.dataset)
    batches = int(sum(trainer.num_val_batches))  # Lightning's count, after limit_val_batches
    return {
        "task": kind,
        "split": split,
        "seq_len": datamodule.data_cfg.seq_len,
        "limit_batches": limit_batches,
        "batches_evaluated": batches,
        # in order, batch_size a batch, the last one short: the first examples of the split
        "examples_evaluated": min(whole, batches * batch_size * trainer.world_size),
        "tokens_evaluated": getattr(task.val_loss, "counted", None),  # the targets val/loss averages over
        "split_examples": whole,
        "metrics": metrics,
        "is_global_zero": trainer.is_global_zero,
    }
