"""Character-level tokenizer: one id per character seen in the training split (sorted by code
point, after the 6 specials); any other character maps to unk."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from zoo.data.errors import DataError
from zoo.data.tokenizers.base import NUM_SPECIAL, Tokenizer

UNKNOWN_TEXT = "\ufffd"  # what decode writes for unk


class CharTokenizer(Tokenizer):
    kind = "char"

    def __init__(self, chars: Iterable[str]):
        self.chars = sorted(set(chars))
        if not self.chars or any(len(c) != 1 for c in self.chars):
            raise DataError("a char tokenizer needs a non-empty set of single characters")
        self._ids = {c: i + NUM_SPECIAL for i, c in enumerate(self.chars)}

    @classmethod
    def train(cls, texts: Iterable[str], cfg=None) -> CharTokenizer:
        seen: set[str] = set()
        for text in texts:
            seen.update(text)
        if not seen:
            raise DataError("tokenizer=char: the training text is empty")
        return cls(seen)

    @property
    def vocab_size(self) -> int:
        return NUM_SPECIAL + len(self.chars)

    def encode(self, text: str) -> list[int]:
        unk, ids = self.unk_id, self._ids
        return [ids.get(c, unk) for c in text]

    def decode(self, ids: Iterable[int]) -> str:
        out = []
        for i in map(int, ids):
            if i == self.unk_id:
                out.append(UNKNOWN_TEXT)
            elif NUM_SPECIAL <= i < self.vocab_size:
                out.append(self.chars[i - NUM_SPECIAL])
        return "".join(out)

    def piece_bytes(self) -> list[bytes]:
        """Each character's UTF-8 bytes; the specials none (unk included: the character it
        replaced is not known from the id)."""
        return [b""] * NUM_SPECIAL + [c.encode("utf-8", errors="surrogatepass") for c in self.chars]

    def _identity(self) -> bytes:
        return "".join(self.chars).encode("utf-8", errors="surrogatepass")

    def _state(self, directory: Path) -> dict:
        return {"chars": "".join(self.chars)}

    @classmethod
    def _from_state(cls, meta: dict, directory: Path) -> CharTokenizer:
        return cls(meta["chars"])
