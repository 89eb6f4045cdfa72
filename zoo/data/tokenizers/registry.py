"""`TOKENIZERS`: the kind -> class table, and building / loading by kind.

kind hf wraps an existing Hugging Face tokenizer directory (`tokenizer.path`): nothing to
train, nothing cached.

`build_tokenizer` trains the kinds that learn from text (char, sentencepiece) on the training
texts and caches the result under `<cache>/tokenizers/<kind>-<hash>/`, where the hash covers
the texts and the settings; a second build with the same inputs loads it instead of training
(`tokenizer.from_cache` is then True).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Union

from zoo.config.data import SENTENCEPIECE_KINDS, TokenizerConfig, TokenizerKind
from zoo.data.cache import cache_root, hash_texts
from zoo.data.errors import DataError
from zoo.data.tokenizers.base import META_FILE, Tokenizer
from zoo.data.tokenizers.byte import ByteTokenizer
from zoo.data.tokenizers.char import CharTokenizer
from zoo.data.tokenizers.hf import HFTokenizer
from zoo.data.tokenizers.sentencepiece import SentencePieceTokenizer

TOKENIZERS: dict[str, type[Tokenizer]] = {
    "byte": ByteTokenizer,
    "char": CharTokenizer,
    "sentencepiece_bpe": SentencePieceTokenizer,
    "sentencepiece_unigram": SentencePieceTokenizer,
    "hf": HFTokenizer,
}

Texts = Union[Iterable[str], Callable[[], Iterable[str]]]


def build_tokenizer(cfg: TokenizerConfig, texts: Texts = ()) -> Tokenizer:
    """The tokenizer `cfg` describes, trained on `texts` where the kind learns from text.

    `texts` is a re-iterable sequence or a zero-argument callable returning a fresh iterable
    (it is read twice: once to hash, once to train)."""
    if not isinstance(cfg, TokenizerConfig):
        from zoo.config.data import as_tokenizer_config

        cfg = as_tokenizer_config(cfg)
    if cfg.kind == TokenizerKind.byte:
        return ByteTokenizer()
    if cfg.kind == TokenizerKind.hf:
        return HFTokenizer(cfg.path)
    fresh = texts if callable(texts) else (lambda: texts)
    settings = {"kind": cfg.kind.value, "format": 1}
    if cfg.kind in SENTENCEPIECE_KINDS:
        settings.update(vocab_size=cfg.vocab_size, character_coverage=cfg.character_coverage,
                        byte_fallback=cfg.byte_fallback, max_sentences=cfg.max_sentences)
    key = hash_texts(fresh(), settings)
    target = cache_root(cfg.cache_dir) / "tokenizers" / f"{cfg.kind.value}-{key[:24]}"
    # one process trains, the others (ranks started by torchrun or srun at the same moment)
    # wait for it and read the cache
    with _exclusive(cache_root(cfg.cache_dir) / "locks" / f"{target.name}.lock"):
        if (target / META_FILE).is_file():
            tokenizer = load_tokenizer(target)
            tokenizer.from_cache = True
            return tokenizer
        tokenizer = TOKENIZERS[cfg.kind.value].train(fresh(), cfg)
        _save_atomically(tokenizer, target)
    return tokenizer


@contextlib.contextmanager
def _exclusive(lock_path: Path):
    """An exclusive advisory lock (flock) held for the duration of the block."""
    import fcntl

    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def load_tokenizer(directory: str | Path) -> Tokenizer:
    """Rebuild a tokenizer from a directory written by `Tokenizer.save`."""
    directory = Path(directory)
    meta_path = directory / META_FILE
    if not meta_path.is_file():
        raise DataError(f"no tokenizer in {directory}: {META_FILE} is missing")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        kind = meta["kind"]
    except (ValueError, KeyError) as exc:
        raise DataError(f"{meta_path} is not a zoo tokenizer file ({exc})") from None
    if kind not in TOKENIZERS:
        raise DataError(f"{meta_path}: unknown tokenizer kind {kind!r}; "
                        f"known: {', '.join(TOKENIZERS)}")
    return TOKENIZERS[kind]._from_state(meta, directory)


def _save_atomically(tokenizer: Tokenizer, target: Path) -> None:
    """Write into a temporary sibling and rename, so a concurrent reader (another rank) never
    sees half a tokenizer; if another process won the race, keep its copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        tokenizer.save(tmp)
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / META_FILE).is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
