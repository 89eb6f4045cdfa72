"""How many bytes of text each token id stands for: the denominator of bits per byte.

A loss per token cannot be compared across tokenizers (a token is a byte for one, a word for
another); bits per UTF-8 byte of the same text can (Gao et al. 2020, "The Pile"; nanochat's
`evaluate_bpb`). `TextBytes.of(tokenizer)` holds, for every id of the tokenizer:

- `lengths` [V]: the UTF-8 bytes of the id's text (`Tokenizer.piece_bytes`): 1 for a byte id,
  a character's bytes for a char id, a SentencePiece piece's text with "▁" as the one space it
  decodes to and <0xNN> as one byte; 0 for every special token (pad, unk, bos, eos, mask, cls).
- `leading` [V]: 1 where the id's text starts with a space that is not in the text when the id
  begins a document, because the tokenizer puts a space before every document and decode drops
  it (SentencePiece's dummy prefix: "And" is encoded "▁And"); 0 everywhere for a tokenizer that
  adds no such space. Whether it does is observed, by encoding a short word.
- `boundaries`: the ids after which a document begins (bos and eos).

A document's ids, as `encode` returns them, then stand for exactly its bytes: the sum of their
lengths, less the leading space of its first id (`document`). In a packed stream every document
follows eos (or starts the stream), so the same holds for any run of the stream's ids (`stream`,
and on the device `zoo.tasks.target_bytes.TargetBytes`). What an unk id replaced is unknown from
the id, so a text with unknown characters counts fewer bytes than it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PROBES = ("And", "the", "a", "e", "x", "1")  # short words whose encoding shows a dummy prefix
CHUNK = 1 << 24  # stream ids read at a time


@dataclass(frozen=True)
class TextBytes:
    """Bytes of text per id of one tokenizer (see the module docstring); arrays of length V."""

    lengths: np.ndarray  # int64 [V]
    leading: np.ndarray  # int64 [V], 0 or 1
    boundaries: tuple[int, ...]

    @classmethod
    def of(cls, tokenizer) -> TextBytes:
        pieces = tokenizer.piece_bytes()
        lengths = np.array([len(p) for p in pieces], dtype=np.int64)
        spaced = np.array([p[:1] == b" " for p in pieces], dtype=np.int64)
        prefix = _adds_leading_space(tokenizer, lengths, spaced)
        boundaries = tuple(sorted({i for i in (tokenizer.bos_id, tokenizer.eos_id) if i is not None}))
        return cls(lengths=lengths, leading=spaced if prefix else np.zeros_like(spaced), boundaries=boundaries)

    @property
    def vocab_size(self) -> int:
        return len(self.lengths)

    def document(self, ids: Sequence[int]) -> int:
        """The bytes of the text of one document's ids (as `encode` returns them)."""
        rows = np.asarray(ids, dtype=np.int64)
        if rows.size == 0:
            return 0
        return int(self.lengths[rows].sum() - self.leading[rows[0]])

    def stream(self, tokens, counts: np.ndarray | None = None) -> int:
        """The bytes of text of a packed stream (documents, each followed by eos; an array or a
        `zoo.data.prepared.TokenStream`). With the stream's id `counts` and no leading spaces
        to take off, no pass over the stream: sum(counts · lengths)."""
        if counts is not None:
            counts = np.asarray(counts, dtype=np.int64)[: self.vocab_size]
            total = int(counts @ self.lengths[: len(counts)])
        else:
            total = sum(int(self.lengths[tokens[a : a + CHUNK]].sum()) for a in range(0, len(tokens), CHUNK))
        if not self.leading.any():
            return total
        return total - self._document_starts_with_space(tokens)

    def _document_starts_with_space(self, tokens) -> int:
        """How many documents of the stream begin with an id whose leading space is not text:
        ids at position 0 or after a boundary id, with `leading` set."""
        boundary = np.zeros(self.vocab_size, dtype=bool)
        boundary[list(self.boundaries)] = True
        n, found, before = len(tokens), 0, True  # the stream's first id begins a document
        for a in range(0, n, CHUNK):
            ids = np.asarray(tokens[a : min(n, a + CHUNK)], dtype=np.int64)
            after = np.concatenate([[before], boundary[ids[:-1]]])
            found += int(self.leading[ids][after].sum())
            before = bool(boundary[ids[-1]])
        return found


def _adds_leading_space(tokenizer, lengths: np.ndarray, spaced: np.ndarray) -> bool:
    """Does `encode` put a space before a document's first word that decode drops? Seen on a
    short word all of whose ids stand for text: their bytes exceed the word's by that space."""
    for word in PROBES:
        ids = tokenizer.encode(word)
        if ids and all(0 <= i < len(lengths) and lengths[i] > 0 for i in ids):
            return bool(spaced[ids[0]]) and int(lengths[ids].sum()) == len(word.encode("utf-8")) + 1
    return False
