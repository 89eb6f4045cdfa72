"""Byte-level tokenizer: the UTF-8 bytes of the text, 256 ids after the 6 specials
(V = 262). Nothing to train, nothing unknown; the vocabulary of ByT5 (Xue et al. 2022)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from zoo.data.tokenizers.base import NUM_SPECIAL, Tokenizer


class ByteTokenizer(Tokenizer):
    kind = "byte"

    @property
    def vocab_size(self) -> int:
        return NUM_SPECIAL + 256

    def encode(self, text: str) -> list[int]:
        return [b + NUM_SPECIAL for b in text.encode("utf-8")]

    def encode_documents(self, texts: list[str], dtype) -> np.ndarray:
        """`Tokenizer.encode_documents` in numpy: every byte shifted past the specials, eos
        inserted after each document."""
        encoded = [t.encode("utf-8") for t in texts]
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8).astype(dtype) + NUM_SPECIAL
        ends = np.cumsum([len(e) for e in encoded])
        return np.insert(data, ends, self.eos_id).astype(dtype, copy=False)

    def decode(self, ids: Iterable[int]) -> str:
        data = bytes(i - NUM_SPECIAL for i in map(int, ids) if NUM_SPECIAL <= i < self.vocab_size)
        return data.decode("utf-8", errors="replace")

    def piece_bytes(self) -> list[bytes]:
        """One byte for each of the 256 byte ids; the specials none."""
        return [b""] * NUM_SPECIAL + [bytes([b]) for b in range(256)]

    def _state(self, directory: Path) -> dict:
        return {}

    @classmethod
    def _from_state(cls, meta: dict, directory: Path) -> ByteTokenizer:
        return cls()
