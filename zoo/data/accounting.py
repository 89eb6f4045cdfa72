"""How much data a language-model run had, as its summary.json records it (`data`): a
comparison divides tokens seen by the training tokens for epochs, and reads the training text's
bytes beside them."""

from __future__ import annotations

from zoo.data.tokenizers.text_bytes import TextBytes


def split_sizes(datamodule) -> dict[str, int | None] | None:
    """{"train_tokens", "train_bytes", "val_tokens"} of a packing task's data module (causal
    and masked LM) after setup: the tokens of each split's stream (every document's ids and its
    eos) and the UTF-8 bytes of text the training tokens stand for (`TextBytes.stream`, from
    the prepared id counts). A stream's training split is not known in advance: its tokens and
    bytes are None. None for the other tasks."""
    if not datamodule.spec.packs:
        return None
    if datamodule.prepared is None:  # a stream: the held-out documents are in memory
        return {"train_tokens": None, "train_bytes": None, "val_tokens": len(datamodule.val_dataset.tokens)}
    streams = datamodule.prepared.streams
    train_bytes = TextBytes.of(datamodule.tokenizer).stream(streams["train"], datamodule.prepared.counts("train"))
    return {"train_tokens": len(streams["train"]), "train_bytes": train_bytes, "val_tokens": len(streams["validation"])}
