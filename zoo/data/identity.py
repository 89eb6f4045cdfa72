"""Which local data files a run reads, by content: recorded in every checkpoint, compared when the
run is resumed.

A run killed and resumed reads its data files again. Without a record of what they held, a file
edited, replaced or regenerated in between was trained on without a word: the resumed run's
record describes data it was never trained on. Each file is named by its absolute path, size
and SHA-256 (`remembered_digest`: a file is read in full once, then remembered by its size,
modification time and inode, as the prepared corpus's key already does). Built-in corpora and
Hub datasets have no local files: nothing is recorded for them."""

from __future__ import annotations

import os
from typing import Any

from zoo.config.schema.data import DataConfig, DataSource
from zoo.data.cache import cache_root
from zoo.data.files import resolve_files
from zoo.data.integrity import remembered_digest

KEYS = ("data.path", "data.val_path")


def data_files(cfg: DataConfig) -> dict[str, list[dict[str, Any]]] | None:
    """{"data.path": [{"path", "size", "sha256"}, ...], "data.val_path": [...]} for local files
    (absolute paths, in the order the run reads them); None for another source."""
    if cfg.source != DataSource.local:
        return None
    store = cache_root(cfg.cache_dir) / "prepared" / "file-digests.json"
    out: dict[str, list[dict[str, Any]]] = {}
    for key, spec in zip(KEYS, (cfg.path, cfg.val_path)):
        if spec is None:
            continue
        out[key] = [
            {"path": os.path.abspath(f), "size": os.path.getsize(f), "sha256": remembered_digest(f, store)}
            for f in resolve_files(spec, key)
        ]
    return out


def changed_files(recorded: dict, current: dict) -> list[dict[str, Any]]:
    """The differences between two `data_files` records, one entry per file, in reading order:
    {"key", "path", "was": {"size", "sha256"} or None (a file added), "now": ... or None (one
    fewer)}. Files are compared by content in the order the run reads them, so the same files
    under another absolute path (the project moved, a relative data.path from another
    directory) are no change."""
    changes = []
    for key in sorted(set(recorded) | set(current)):
        before = [e for e in recorded.get(key) or [] if isinstance(e, dict)]
        after = list(current.get(key) or [])
        for i in range(max(len(before), len(after))):
            was = before[i] if i < len(before) else None
            now = after[i] if i < len(after) else None
            if (
                was is not None
                and now is not None
                and (was.get("size"), was.get("sha256")) == (now["size"], now["sha256"])
            ):
                continue
            entry = now if now is not None else was
            assert entry is not None  # index i is in one list or the other, whose entries are dicts
            path = entry.get("path")
            changes.append({"key": key, "path": path, "was": _identity(was), "now": _identity(now)})
    return changes


def _identity(entry: dict | None) -> dict[str, Any] | None:
    return None if entry is None else {"size": entry.get("size"), "sha256": entry.get("sha256")}


def describe(change: dict[str, Any]) -> str:
    """One change as a phrase: "data.path file /d/train.txt changed (1,024 bytes, sha256
    0a1b2c3d... then; 1,100 bytes, sha256 4e5f6a7b... now)"."""
    was, now = change["was"], change["now"]
    if now is None:
        return f"{change['key']} no longer reads {change['path']}"
    if was is None:
        return f"{change['key']} now also reads {change['path']}"
    return f"{change['key']} file {change['path']} changed ({_short(was)} then; {_short(now)} now)"


def _short(identity: dict[str, Any]) -> str:
    size = identity.get("size")
    size_text = f"{size:,} bytes" if isinstance(size, int) else "size unknown"
    return f"{size_text}, sha256 {str(identity.get('sha256'))[:12]}..."
