"""The data module of a run, set up for fitting with the per-device batch."""

from __future__ import annotations

import logging

from zoo.config.schema.root import ZooConfig
from zoo.data import build_datamodule, check_vocab

log = logging.getLogger("zoo")


def build_data(spec: ZooConfig, device_batch: int):
    """The LightningDataModule, set up ("fit"): its tokenizer trained or loaded, its splits
    made (prepared token shards are reported: where, and whether this process built them); the
    model's vocabulary must hold the tokenizer's."""
    datamodule = build_datamodule(
        spec.data, spec.tokenizer, spec.task.kind.value, batch_size=device_batch, seed=spec.seed
    )
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
    check_vocab(spec.model.vocab_size, datamodule.tokenizer)
    return datamodule
