"""`TOKENIZERS`: the kind -> class table, and building / loading by kind.

kind hf wraps an existing Hugging Face tokenizer directory (`tokenizer.path`): nothing to
train, nothing cached.

`build_tokenizer` trains the kinds that learn from text (char, sentencepiece) on the training
texts and caches the result under `<cache>/tokenizers/<kind>-<hash>/`, where the hash covers
the texts and the settings; a second build with the same inputs loads it instead of training
(`tokenizer.from_cache` is then True).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from zoo.config.records.atomic import umask
from zoo.config.schema.data import SENTENCEPIECE_KINDS, TokenizerConfig, TokenizerKind, as_tokenizer_config
from zoo.data.cache import cache_root, exclusive, hash_texts
from zoo.data.errors import DataError
from zoo.data.integrity import discard
from zoo.data.tokenizers.base import META_FILE, Tokenizer
from zoo.data.tokenizers.byte import ByteTokenizer
from zoo.data.tokenizers.char import CharTokenizer
from zoo.data.tokenizers.hf import HFTokenizer
from zoo.data.tokenizers.manifest import check_manifest
from zoo.data.tokenizers.sentencepiece import SentencePieceTokenizer

TOKENIZERS: dict[str, type[Tokenizer]] = {
    "byte": ByteTokenizer,
    "char": CharTokenizer,
    "sentencepiece_bpe": SentencePieceTokenizer,
    "sentencepiece_unigram": SentencePieceTokenizer,
    "hf": HFTokenizer,
}

Texts = Iterable[str] | Callable[[], Iterable[str]]


def build_tokenizer(cfg: TokenizerConfig, texts: Texts = (), *, corpus: str | None = None) -> Tokenizer:
    """The tokenizer `cfg` describes, trained on `texts` where the kind learns from text.

    `texts` is a re-iterable sequence or a zero-argument callable returning a fresh iterable.
    The cache entry is named by `corpus` (a digest of what the texts are drawn from, e.g.
    `zoo.data.sources.corpus_key`) when given, and the texts are then read only to train; else
    by a hash of the texts themselves (read twice: once to hash, once to train)."""
    if not isinstance(cfg, TokenizerConfig):
        cfg = as_tokenizer_config(cfg)
    if cfg.kind == TokenizerKind.byte:
        return ByteTokenizer()
    if cfg.kind == TokenizerKind.hf:
        assert cfg.path is not None  # TokenizerConfig refuses kind hf without one
        return HFTokenizer(cfg.path)
    fresh = texts if callable(texts) else (lambda: texts)
    settings = {"kind": cfg.kind.value, "format": 1}
    if cfg.kind in SENTENCEPIECE_KINDS:
        settings.update(
            vocab_size=cfg.vocab_size,
            character_coverage=cfg.character_coverage,
            byte_fallback=cfg.byte_fallback,
            max_sentences=cfg.max_sentences,
        )
    if corpus is not None:
        key = hashlib.sha256(json.dumps({**settings, "corpus": corpus}, sort_keys=True).encode()).hexdigest()
    else:
        key = hash_texts(fresh(), settings)
    target = cache_root(cfg.cache_dir) / "tokenizers" / f"{cfg.kind.value}-{key[:24]}"
    cached = _from_cache(target)  # entries appear whole (renamed in), so no lock to read one:
    if cached is not None:  # a read-only cache that holds the entry works
        return cached
    # one process trains, the others (ranks started by torchrun or srun at the same moment)
    # wait for it and read the cache
    with exclusive(cache_root(cfg.cache_dir) / "locks" / f"{target.name}.lock"):
        cached = _from_cache(target)
        if cached is not None:
            return cached
        tokenizer = TOKENIZERS[cfg.kind.value].train(fresh(), cfg)
        _save_atomically(tokenizer, target)
    return tokenizer


def _from_cache(target: Path) -> Tokenizer | None:
    """The cached tokenizer in `target`, or None when there is none; a damaged entry (its files
    no longer match the digest recorded when it was written) is removed, with one line, so that
    it is trained again."""
    if not (target / META_FILE).is_file():
        return None
    try:
        tokenizer = load_tokenizer(target)
    except DataError as exc:
        print(f"zoo: {exc}; training it again", file=sys.stderr, flush=True)
        discard(target, "the tokenizer cache entry", "tokenizer.cache_dir")
        return None
    tokenizer.from_cache = True
    return tokenizer


def load_tokenizer(directory: str | Path) -> Tokenizer:
    """Rebuild a tokenizer from a directory written by `Tokenizer.save`."""
    directory = Path(directory)
    meta_path = directory / META_FILE
    if not meta_path.is_file():
        raise DataError(f"no tokenizer in {directory}: {META_FILE} is missing")
    if meta_path.is_symlink():
        raise DataError(f"the tokenizer in {directory}: its {META_FILE} is a link; a tokenizer's files are plain files")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        kind = meta["kind"]
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{meta_path} is not a zoo tokenizer file ({exc})") from None
    if not isinstance(kind, str) or kind not in TOKENIZERS:
        raise DataError(f"{meta_path}: unknown tokenizer kind {kind!r}; known: {', '.join(TOKENIZERS)}")
    check_manifest(meta.get("files"), directory)  # before any model file is read
    try:
        tokenizer = TOKENIZERS[kind]._from_state(meta, directory)
    except DataError:
        raise
    except Exception as exc:  # a damaged model file fails in the library that parses it
        raise DataError(
            f"the tokenizer in {directory} cannot be read ({type(exc).__name__}: {str(exc).strip()[:200]})"
        ) from None
    recorded = meta.get("sha256")
    if recorded is None:  # never trusted on first use: the record is what proves the files
        raise DataError(
            f"the tokenizer in {directory} has no digest record (sha256 in {META_FILE}), so "
            f"its files cannot be checked; train it again, or save it with zoo"
        )
    if recorded != tokenizer.digest():
        raise DataError(
            f"the tokenizer in {directory} does not match the digest recorded when it "
            f"was saved: its files were changed or damaged"
        )
    return tokenizer


def _save_atomically(tokenizer: Tokenizer, target: Path) -> None:
    """Write into a temporary sibling and rename, so a concurrent reader (another rank) never
    sees half a tokenizer; if another process won the race, keep its copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    os.chmod(tmp, 0o777 & ~umask())  # mkdtemp makes it 0700: a team's shared cache follows the umask
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
