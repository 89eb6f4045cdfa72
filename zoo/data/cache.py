"""Where derived artifacts (trained tokenizers, datasets' cache files) live, and the content
hashes that name them."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from zoo.config.errors import ConfigError

ENV_VAR = "ZOO_CACHE"


def cache_root(cache_dir: str | None = None) -> Path:
    """`cache_dir` if given, else `$ZOO_CACHE`, else `~/.cache/zoo` (user `~` expanded)."""
    chosen = cache_dir or os.environ.get(ENV_VAR) or os.path.join("~", ".cache", "zoo")
    root = Path(os.path.expanduser(chosen))
    if root.exists() and not root.is_dir():  # every cache entry below it would fail to be made
        named = "the cache_dir" if cache_dir else f"${ENV_VAR}" if os.environ.get(ENV_VAR) else "the default cache"
        raise ConfigError(f"{named} {root} is not a directory; point data.cache_dir or {ENV_VAR} at a directory")
    return root


def hash_texts(texts: Iterable[str], settings: dict) -> str:
    """SHA-256 of `settings` (JSON, sorted keys) followed by every text, length-prefixed so
    that ["ab", "c"] and ["a", "bc"] differ."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for text in texts:
        data = text.encode("utf-8", errors="surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


@contextlib.contextmanager
def exclusive(lock_path: Path):
    """An exclusive advisory lock (flock) held for the duration of the block: one process builds a
    cache entry while the others (ranks started at the same moment) wait for it."""
    import fcntl

    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
