"""What every tokenizer offers: text <-> ids, special ids, and `save`, so a run directory
can rebuild the exact tokenizer a model was trained with (`registry.load_tokenizer` reads it back).

zoo's own kinds (byte, char, sentencepiece) share fixed special ids: pad 0, unk 1, bos 2,
eos 3, mask 4, cls 5; their ordinary tokens start at 6. A wrapped Hugging Face tokenizer
(kind hf) keeps its own ids, some of them possibly missing (None). Collators and tasks
therefore read the ids from the tokenizer they hold (`pad_id`, ..., `special_ids()`), never
from the constants here.
"""

from __future__ import annotations

import abc
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from zoo.config.records.atomic import write_text
from zoo.config.schema.data import TokenizerConfig
from zoo.data.tokenizers.manifest import META_NAME, file_manifest

if TYPE_CHECKING:
    import numpy as np

SPECIAL_TOKENS = {
    "pad": "<pad>",
    "unk": "<unk>",
    "bos": "<s>",
    "eos": "</s>",
    "mask": "<mask>",
    "cls": "<cls>",
}
SPECIAL_IDS = {name: i for i, name in enumerate(SPECIAL_TOKENS)}
NUM_SPECIAL = len(SPECIAL_TOKENS)
META_FILE = META_NAME  # "tokenizer.json"


class Tokenizer(abc.ABC):
    """Base class. Subclasses set `kind` and implement `encode`, `decode`, `vocab_size`,
    `_state` (JSON-able settings) and `_from_state`."""

    kind: str = ""
    from_cache: bool = False  # set when a build found it in the cache instead of training

    # class defaults: zoo's fixed ids; kind hf sets its own per instance (None = missing)
    pad_id = SPECIAL_IDS["pad"]
    unk_id = SPECIAL_IDS["unk"]
    bos_id = SPECIAL_IDS["bos"]
    eos_id = SPECIAL_IDS["eos"]
    mask_id = SPECIAL_IDS["mask"]
    cls_id = SPECIAL_IDS["cls"]

    @property
    @abc.abstractmethod
    def vocab_size(self) -> int:
        """V: every id is in [0, V)."""

    @abc.abstractmethod
    def encode(self, text: str) -> list[int]:
        """Ids of `text`, without bos/eos (the collators add those where a task wants them)."""

    @abc.abstractmethod
    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`; pad, bos, eos, mask and cls are dropped."""

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def encode_documents(self, texts: list[str], dtype) -> np.ndarray:
        """The ids of `texts`, each followed by eos, as one flat numpy array of `dtype` (the
        packed stream of a language model)."""
        from itertools import chain

        import numpy as np

        rows = self.encode_batch(texts)
        n = sum(len(r) for r in rows) + len(rows)
        eos = (self.eos_id,)
        return np.fromiter(chain.from_iterable(chain(r, eos) for r in rows), dtype=dtype, count=n)

    def piece_bytes(self) -> list[bytes]:
        """For every id in [0, V): the UTF-8 bytes of text it stands for, as decode writes them
        mid-text; b"" for special tokens (pad, unk, bos, eos, mask, cls and the like).
        `zoo.data.tokenizers.text_bytes` counts text bytes with it (bits per byte)."""
        raise NotImplementedError(f"tokenizer kind {self.kind!r} does not say what text its ids stand for")

    def special_ids(self) -> dict[str, int | None]:
        """{"pad": .., "unk": .., "bos": .., "eos": .., "mask": .., "cls": ..}: for zoo's own
        kinds {"pad": 0, "unk": 1, "bos": 2, "eos": 3, "mask": 4, "cls": 5}; None where the
        tokenizer has no such token (kind hf)."""
        return {
            "pad": self.pad_id,
            "unk": self.unk_id,
            "bos": self.bos_id,
            "eos": self.eos_id,
            "mask": self.mask_id,
            "cls": self.cls_id,
        }

    def fingerprint(self) -> str:
        """Hex digest that changes whenever the mapping text -> ids could; names cached
        tokenized datasets."""
        return self.digest()[:24]

    def digest(self) -> str:
        """SHA-256 of what determines the mapping, recorded in tokenizer.json by `save` and
        checked by `load`: a changed or damaged model file is refused."""
        return hashlib.sha256(self.kind.encode() + b"\0" + self._identity()).hexdigest()

    def _identity(self) -> bytes:
        """Bytes that determine the mapping (beyond `kind`); empty for fixed vocabularies."""
        return b""

    def save(self, directory: str | Path) -> Path:
        """Write `tokenizer.json` (kind, settings, digest, the manifest of the other files) and any
        model files into `directory`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        meta = {"kind": self.kind, "vocab_size": self.vocab_size, "special_ids": self.special_ids()}
        meta.update(self._state(directory))
        meta["sha256"] = self.digest()
        meta["files"] = file_manifest(directory)  # checked before any of them is read again
        write_text(directory / META_FILE, json.dumps(meta, indent=1, ensure_ascii=False))
        return directory

    @abc.abstractmethod
    def _state(self, directory: Path) -> dict:
        """Settings to store in tokenizer.json; may write extra files into `directory`."""

    @classmethod
    @abc.abstractmethod
    def _from_state(cls, meta: dict, directory: Path) -> Tokenizer:
        """Inverse of `_state`."""

    @classmethod
    def train(cls, texts: Iterable[str], cfg: TokenizerConfig) -> Tokenizer:
        """A tokenizer of this kind learned from `texts` with `cfg`'s settings: the kinds that
        learn from text (char, sentencepiece) define it."""
        raise NotImplementedError(f"tokenizer kind {cls.kind!r} is not trained")
