"""Text columns -> id columns, one function per task shape, applied with
`datasets.Dataset.map(batched=True)`.

The map is named by an explicit fingerprint (tokenizer fingerprint + settings + the parent
dataset's fingerprint), so file-backed datasets reuse their cache files on the next run and
nothing tries to hash the tokenizer object.
"""

from __future__ import annotations

import hashlib
from typing import Any

from zoo.data.integrity import checked
from zoo.data.tokenizers.base import Tokenizer


def tokenize_lm(ds, tokenizer: Tokenizer, text_column: str):
    """Column `input_ids`: ids of each document followed by eos (the document separator
    when documents are packed)."""
    eos = tokenizer.eos_id

    def fn(batch):
        return {"input_ids": [ids + [eos] for ids in tokenizer.encode_batch(_texts(batch[text_column]))]}

    return _map(ds, fn, tokenizer, ("lm", text_column))


def tokenize_seq2seq(ds, tokenizer: Tokenizer, source_column: str, target_column: str, seq_len: int):
    """Columns `input_ids` = x[:seq_len-1] + [eos] and `target_ids` = y[:seq_len-1] (the
    collator adds bos / eos, so the decoder side is at most seq_len long)."""
    eos, keep = tokenizer.eos_id, seq_len - 1

    def fn(batch):
        xs = tokenizer.encode_batch(_texts(batch[source_column]))
        ys = tokenizer.encode_batch(_texts(batch[target_column]))
        return {"input_ids": [x[:keep] + [eos] for x in xs], "target_ids": [y[:keep] for y in ys]}

    return _map(ds, fn, tokenizer, ("seq2seq", source_column, target_column, seq_len))


def tokenize_classification(
    ds, tokenizer: Tokenizer, text_column: str, label_column: str, label_ids: dict[Any, int], seq_len: int
):
    """Columns `input_ids` = [cls] + x[:seq_len-1] and `label` = label_ids[value]."""
    cls, keep = tokenizer.cls_id, seq_len - 1

    def fn(batch):
        xs = tokenizer.encode_batch(_texts(batch[text_column]))
        return {"input_ids": [[cls] + x[:keep] for x in xs], "label": [label_ids[v] for v in batch[label_column]]}

    key = ("cls", text_column, label_column, seq_len, sorted(map(str, label_ids.items())))
    return _map(ds, fn, tokenizer, key)


def _map(ds, fn, tokenizer: Tokenizer, key: tuple, desc: str | None = None):
    digest = hashlib.sha256(repr((ds._fingerprint, tokenizer.fingerprint(), key)).encode()).hexdigest()[:32]
    return checked(
        lambda fresh: ds.map(
            fn,
            batched=True,
            batch_size=1000,
            remove_columns=ds.column_names,
            new_fingerprint=digest,
            load_from_cache_file=not fresh,
            desc=desc or "tokenizing",
        ),
        "the tokenized data",
    )


def _texts(values) -> list[str]:
    return ["" if v is None else v if isinstance(v, str) else str(v) for v in values]
