"""Where derived artifacts (trained tokenizers, datasets' cache files) live, and the content
hashes that name them."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable, Optional

ENV_VAR = "ZOO_CACHE"


def cache_root(cache_dir: Optional[str] = None) -> Path:
    """`cache_dir` if given, else `$ZOO_CACHE`, else `~/.cache/zoo` (user `~` expanded)."""
    chosen = cache_dir or os.environ.get(ENV_VAR) or os.path.join("~", ".cache", "zoo")
    return Path(os.path.expanduser(chosen))


def hash_texts(texts: Iterable[str], settings: dict) -> str:
    """SHA-256 of `settings` (JSON, sorted keys) followed by every text, length-prefixed so
    that ["ab", "c"] and ["a", "bc"] differ."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for text in texts:
        data = text.encode("utf-8", errors="surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()
