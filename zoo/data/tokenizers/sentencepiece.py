"""SentencePiece subword tokenizers (Kudo & Richardson 2018), trained on the training split:
BPE (Sennrich et al. 2016) or the unigram language model (Kudo 2018).

Training reads the text line by line; newline and tab are kept as their own pieces so that
multi-line documents decode to themselves. Normalization is the identity and whitespace is kept
as written, so ordinary text round-trips exactly. `vocab_size` is a soft limit: a small
training text yields fewer pieces (the actual size is `vocab_size` of the result).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from zoo.data.errors import DataError
from zoo.data.tokenizers.base import SPECIAL_IDS, SPECIAL_TOKENS, Tokenizer
from zoo.data.tokenizers.manifest import inside

MODEL_FILE = "sentencepiece.model"
KEPT_WHITESPACE = ["\n", "\t"]
WORD_BOUNDARY = "\u2581"  # "▁", SentencePiece's marker of a space
_REQUIRED_CHARS = re.compile(r"smaller than required_chars\. (\d+) vs (\d+)")
# SentencePiece skips training sentences longer than max_sentence_length (bytes, set to 64 KiB
# below); longer lines (a corpus that is one huge line) are cut into pieces of at most this many
# characters (4 bytes each at most in UTF-8), at a space where there is one.
CHUNK_CHARS = 1 << 14


def _chunks(line: str, size: int = CHUNK_CHARS):
    """`line` in pieces of at most `size` characters, cut after the last space of each piece
    when there is one (so words stay whole)."""
    while len(line) > size:
        cut = line.rfind(" ", size // 2, size)
        cut = size if cut < 0 else cut + 1
        yield line[:cut]
        line = line[cut:]
    if line:
        yield line


class SentencePieceTokenizer(Tokenizer):
    """Wraps a trained `sentencepiece.SentencePieceProcessor`; `model_type` is "bpe" or
    "unigram"."""

    def __init__(self, model_proto: bytes, model_type: str):
        import sentencepiece as spm

        self.model_type = model_type
        self.kind = f"sentencepiece_{model_type}"
        self._proto = model_proto
        self._sp = spm.SentencePieceProcessor(model_proto=model_proto)
        for name, token in SPECIAL_TOKENS.items():
            got = self._sp.piece_to_id(token)
            if got != SPECIAL_IDS[name]:
                raise DataError(
                    f"sentencepiece model has {token} at id {got}, expected {SPECIAL_IDS[name]}; retrain it with zoo"
                )

    @classmethod
    def train(cls, texts: Iterable[str], cfg) -> SentencePieceTokenizer:
        """Train on `texts` with the settings of a `TokenizerConfig` (vocab_size,
        character_coverage, byte_fallback, max_sentences)."""
        import io

        import sentencepiece as spm

        model_type = "bpe" if str(cfg.kind).endswith("bpe") else "unigram"
        lines = [piece for text in texts for line in text.split("\n") if line.strip() for piece in _chunks(line)]
        if not lines:
            raise DataError(f"tokenizer={cfg.kind}: the training text is empty")
        model = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(lines),
                model_writer=model,
                model_type=model_type,
                vocab_size=cfg.vocab_size,
                hard_vocab_limit=False,
                character_coverage=cfg.character_coverage,
                byte_fallback=cfg.byte_fallback,
                input_sentence_size=cfg.max_sentences,
                shuffle_input_sentence=True,
                max_sentence_length=1 << 16,
                pad_id=SPECIAL_IDS["pad"],
                unk_id=SPECIAL_IDS["unk"],
                bos_id=SPECIAL_IDS["bos"],
                eos_id=SPECIAL_IDS["eos"],
                pad_piece=SPECIAL_TOKENS["pad"],
                unk_piece=SPECIAL_TOKENS["unk"],
                bos_piece=SPECIAL_TOKENS["bos"],
                eos_piece=SPECIAL_TOKENS["eos"],
                control_symbols=[SPECIAL_TOKENS["mask"], SPECIAL_TOKENS["cls"]],
                user_defined_symbols=KEPT_WHITESPACE,
                normalization_rule_name="identity",
                remove_extra_whitespaces=False,
                num_threads=max(1, min(os.cpu_count() or 1, 16)),
                minloglevel=2,
            )
        except RuntimeError as exc:
            raise _explain(exc, cfg) from exc
        return cls(model.getvalue(), model_type)

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self._sp.encode(text)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self._sp.encode(list(texts))

    def decode(self, ids: Iterable[int]) -> str:
        # ids past the vocabulary (a model whose embedding table is larger) are skipped
        return self._sp.decode([i for i in map(int, ids) if 0 <= i < self.vocab_size])

    def piece_bytes(self) -> list[bytes]:
        """A piece's text with its word-boundary marker "▁" as the space it decodes to, a
        byte-fallback piece <0xNN> as its one byte, control and unknown pieces as none. The
        first piece of a document carries the space SentencePiece puts before a document's
        first word (its dummy prefix), which decode drops: `text_bytes.TextBytes` leaves it
        out there."""
        sp = self._sp
        out = []
        for i in range(sp.get_piece_size()):
            piece = sp.id_to_piece(i)
            if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i):
                out.append(b"")
            elif sp.is_byte(i):
                out.append(bytes([int(piece[3:-1], 16)]))  # "<0x0A>"
            else:
                out.append(piece.replace(WORD_BOUNDARY, " ").encode("utf-8"))
        return out

    def _identity(self) -> bytes:
        return self._proto

    def _state(self, directory: Path) -> dict:
        (directory / MODEL_FILE).write_bytes(self._proto)
        return {"model_type": self.model_type, "model_file": MODEL_FILE}

    @classmethod
    def _from_state(cls, meta: dict, directory: Path) -> SentencePieceTokenizer:
        path = inside(directory, meta.get("model_file", MODEL_FILE), "model_file")
        if not path.is_file():
            raise DataError(f"tokenizer directory {directory} lacks {path.name}")
        return cls(path.read_bytes(), meta["model_type"])

    def __getstate__(self):  # SentencePieceProcessor does not pickle; the proto does
        return {"proto": self._proto, "model_type": self.model_type, "from_cache": self.from_cache}

    def __setstate__(self, state):
        SentencePieceTokenizer.__init__(self, state["proto"], state["model_type"])
        self.from_cache = state["from_cache"]


def _explain(exc: RuntimeError, cfg) -> DataError:
    text = str(exc)
    found = _REQUIRED_CHARS.search(text)
    if found:
        return DataError(
            f"tokenizer.vocab_size={cfg.vocab_size} is too small for this training text: its "
            f"characters plus special pieces need {found.group(2)}; raise tokenizer.vocab_size "
            f"or lower tokenizer.character_coverage"
        )
    detail = " ".join(text.split())
    return DataError(f"sentencepiece could not train tokenizer={cfg.kind} with vocab_size={cfg.vocab_size}: {detail}")
