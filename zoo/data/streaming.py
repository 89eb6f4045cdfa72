"""Streamed language-model data (`data.streaming=true`): documents read as `datasets` streams
them (a Hub dataset that is never downloaded whole, or local files), tokenized as they arrive
and packed into the same windows `PackedBlocks` cuts from a prepared stream, in corpus order.

    documents d0 d1 d2 ... ──tokenize, eos after each──► one token stream ──► windows of `block`
    tokens every `stride` tokens; window g goes to rank g mod W

Validation is the first `data.val_documents` documents of the stream (or of `data.val_path` /
the Hub dataset's validation split), held out from training and read once into memory.

A position in the stream is (document, token offset within it, window number): the loader's
`state_dict()` saves the position of the next window of the whole job, so a resumed run skips
the documents before it without tokenizing them and continues with the same windows, on any
number of ranks.

A stream is read once, in order: a run whose trainer.max_steps reaches past its last window is
stopped there on one line (`StreamEnded`), rather than starting epoch after empty epoch.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from zoo.config.schema.data import DataSource
from zoo.data.errors import DataError
from zoo.data.files import builder_for, resolve_files

BATCH_DOCUMENTS = 256  # documents tokenized per call


class StreamEnded(DataError):
    """The training stream has no window left before trainer.max_steps: a stream is read once
    (an epoch of a finite stream would begin where the last one ended, with nothing to read)."""


def token_windows(
    documents: Iterator[str], tokenizer, block: int, stride: int, *, start: tuple[int, int, int] = (0, 0, 0)
) -> Iterator[tuple[np.ndarray, tuple[int, int, int]]]:
    """(window of `block` ids (int64), position of the next window) for every window of the
    packed stream of `documents`, which must begin at document `start[0]`; the first window
    begins `start[1]` tokens into that document and is numbered `start[2]`."""
    doc, offset, number = start
    buffer = np.zeros(0, dtype=np.int64)
    lengths: deque[int] = deque()  # tokens of each document in the buffer (the first may be cut)
    dtype = np.int64
    first = True
    pending: list[str] = []

    def windows():
        nonlocal buffer, doc, offset, number
        while len(buffer) >= block:
            window = buffer[:block].copy()
            buffer = buffer[stride:]
            # the next window starts `stride` tokens on: walk over the documents it passes
            left = stride
            while left and lengths:
                if lengths[0] - offset > left:
                    offset += left
                    left = 0
                else:
                    left -= lengths[0] - offset
                    lengths.popleft()
                    doc, offset = doc + 1, 0
            number += 1
            yield window, (doc, offset, number)

    def add(texts: list[str]):
        nonlocal buffer, first
        ids = tokenizer.encode_documents(texts, dtype)
        ends = np.flatnonzero(ids == tokenizer.eos_id) + 1
        sizes = np.diff(np.concatenate([[0], ends])).tolist()
        if first:  # the saved position lies `offset` tokens into the first document
            ids, first = ids[offset:], False
        lengths.extend(sizes)
        buffer = np.concatenate([buffer, ids]) if len(buffer) else ids

    for text in documents:
        pending.append("" if text is None else text if isinstance(text, str) else str(text))
        if len(pending) == BATCH_DOCUMENTS:
            add(pending)
            pending = []
            yield from windows()
    if pending:
        add(pending)
        yield from windows()


class StreamedWindows(torch.utils.data.IterableDataset):
    """This rank's windows of the training stream, from `position` on: window g of the whole
    job goes to rank g mod `world`; windows numbered before `skip_to` are passed over (a resume
    on another number of ranks)."""

    def __init__(
        self,
        open_documents: Callable[[int], Iterator[str]],
        tokenizer,
        block: int,
        stride: int,
        *,
        rank: int = 0,
        world: int = 1,
    ):
        self.open_documents, self.tokenizer = open_documents, tokenizer
        self.block, self.stride, self.rank, self.world = block, stride, rank, world
        self.position = (0, 0, 0)  # the next window of this rank's reading
        self.skip_to = 0

    def __iter__(self):
        doc, offset, number = self.position
        for window, after in token_windows(
            self.open_documents(doc), self.tokenizer, self.block, self.stride, start=(doc, offset, number)
        ):
            index = after[2] - 1
            self.position = after
            if index >= self.skip_to and index % self.world == self.rank:
                yield torch.from_numpy(window)


class StreamLoader(torch.utils.data.DataLoader):
    """The training loader of a stream. `state_dict()`: the position of the next window of the
    whole job (the windows every rank has taken so far), which `load_state_dict()` restores on
    any number of ranks. Its length is nominal (the stream has none); training ends at
    trainer.max_steps."""

    NOMINAL_LENGTH = 1 << 40
    dataset: StreamedWindows  # (DataLoader's attributes, as this loader has them)
    batch_size: int  # a loader without a batch sampler has one

    def __init__(self, dataset: StreamedWindows, **kwargs: Any) -> None:
        super().__init__(dataset, **kwargs)
        self._batches = 0
        self._started_at = 0  # global window number this pass began at

    def __len__(self) -> int:  # Lightning prefetches nothing from a loader that has a length
        return self.NOMINAL_LENGTH

    def __iter__(self):
        self._started_at = self.dataset.skip_to
        self._batches = 0
        for batch in super().__iter__():
            self._batches += 1
            yield batch
        # reached only when the stream is spent (training stops at trainer.max_steps first)
        windows = self.dataset.position[2]
        raise StreamEnded(
            f"data.streaming=true: the training stream ended after {windows:,} windows of "
            f"{self.dataset.block} tokens, before trainer.max_steps; a stream "
            "is read once, in order: lower trainer.max_steps, or train on prepared shards "
            "(data.streaming=false), which are read again each epoch"
        )

    def state_dict(self) -> dict:
        """{"document", "offset", "window"}: where this rank's reading stands (its next window's
        position); "next_window": the first window no rank has trained on."""
        doc, offset, window = self.dataset.position
        taken = self._started_at + self._batches * self.batch_size * self.dataset.world
        return {"document": int(doc), "offset": int(offset), "window": int(window), "next_window": int(taken)}

    def load_state_dict(self, state: dict) -> None:
        """Resume: read from the saved position (no further than any rank had read) and pass over
        windows already trained on."""
        self.dataset.position = (int(state["document"]), int(state["offset"]), int(state["window"]))
        self.dataset.skip_to = int(state["next_window"])


def held_out_windows(documents: Iterator[str], tokenizer) -> np.ndarray:
    """Every id of `documents` as one int64 array (the validation stream, read once)."""
    parts, pending = [], []
    for text in documents:
        pending.append("" if text is None else str(text))
        if len(pending) == BATCH_DOCUMENTS:
            parts.append(tokenizer.encode_documents(pending, np.int64))
            pending = []
    if pending:
        parts.append(tokenizer.encode_documents(pending, np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def open_stream(cfg, column: str, skip: int, split: str = "train", first: int | None = None) -> Iterator[str]:
    """The texts of `column`, streamed by `datasets` from `cfg` (local files or a Hub dataset),
    from document `skip` on (documents are passed over without tokenizing), at most `first`."""
    import datasets

    if cfg.source == DataSource.local:
        spec = cfg.val_path if split == "validation" else cfg.path
        files = resolve_files(spec, "data.val_path" if split == "validation" else "data.path")
        builder = builder_for(files)
        kwargs = {"sample_by": cfg.sample_by.value} if builder == "text" else {}
        ds = datasets.load_dataset(builder, data_files={"train": files}, split="train", streaming=True, **kwargs)
    elif cfg.source == DataSource.hub:
        try:
            ds = datasets.load_dataset(cfg.hub_name, cfg.hub_config, split=split, streaming=True)
        except Exception as exc:  # noqa: BLE001 - datasets raises many types
            raise DataError(f"data.hub_name={cfg.hub_name!r}: could not stream its {split} split: {exc}") from None
    else:
        raise DataError(f"data.streaming=true reads local files or a Hub dataset, not data.source={cfg.source.value}")
    if cfg.source == DataSource.local and builder == "text":
        ds = ds.filter(_non_blank)  # as the prepared path, which drops blank lines
    if skip:
        ds = ds.skip(skip)
    if first is not None:
        ds = ds.take(first)
    where = f"data.path={spec}" if cfg.source == DataSource.local else f"data.hub_name={cfg.hub_name}"
    return _column_texts(ds, column, where)


def _column_texts(rows, column: str, where: str) -> Iterator[str]:
    """`column` of each row; a nested column is named with dots (WMT's translation.en), as the
    prepared path's flattened columns are. A row without it is one line naming its columns."""
    for row in rows:
        value: Any = row
        for part in column.split(".") if column not in row else [column]:
            if not isinstance(value, dict) or part not in value:
                raise DataError(
                    f"data.text_column={column!r} is not a column of {where}; columns: {', '.join(_dotted(row))}"
                )
            value = value[part]
        yield value


def _dotted(row: dict, prefix: str = "") -> list[str]:
    """The column names of `row`, nested ones joined with dots."""
    names = []
    for key, value in row.items():
        name = f"{prefix}{key}"
        names += _dotted(value, f"{name}.") if isinstance(value, dict) else [name]
    return names


def _non_blank(row) -> bool:
    return bool(row["text"].strip())
