"""A checkpoint's extras (`CheckpointExtras`): written as plain data, read back typed, older
checkpoints without them read as what they ran with, and keys of another zoo version kept."""

from __future__ import annotations

import io

import torch

from zoo.config.records.hparams import CheckpointExtras


def test_the_extras_survive_a_weights_only_checkpoint():
    extras = CheckpointExtras(
        tokenizer_kind="sentencepiece_bpe",
        special_ids={"pad": 0, "bos": 2, "cls": None},
        data={"source": "kjv", "seq_len": 64},
        labels=["neg", "pos"],
    )
    buffer = io.BytesIO()
    torch.save({"extra": extras.to_dict()}, buffer)
    buffer.seek(0)
    assert CheckpointExtras.read(torch.load(buffer, weights_only=True)["extra"]) == extras


def test_a_checkpoint_without_extras_reads_as_bytes_with_no_dataset():
    for raw in (None, {}):
        extras = CheckpointExtras.read(raw)
        assert extras.tokenizer_kind == "byte" and extras.data is None and extras.labels is None


def test_keys_of_another_version_are_kept_and_written_back():
    raw = {"tokenizer_kind": "char", "special_ids": {}, "future_key": [1, 2]}
    extras = CheckpointExtras.read(raw)
    assert extras.unknown == {"future_key": [1, 2]} and extras.to_dict() == raw
