"""The index of a sharded checkpoint (`.metadata`, a pickle torch.distributed.checkpoint
writes) read as data.

A pickle names the objects it rebuilds, and an unpickler that admits a name runs whatever that
name calls. So the index is read by an unpickler that admits an exact list of (module, name)
pairs, the classes and values torch writes there, each looked up by zoo itself, never through
pickle's own lookup: a dotted name (pickle protocol 4 resolves `os.system` inside any admitted
module) and any module prefix are refused. What the index then says is checked before torch's
reader acts on it: every shard it names is a plain file inside the checkpoint (no path, no link),
its byte ranges lie inside that file, no load transform is asked for, and the tensors it declares
fit in the bytes the shards hold (a forged size would otherwise allocate without bound).
"""

from __future__ import annotations

import enum
import pickle
import re
from pathlib import Path, PosixPath, PurePosixPath
from typing import Any

import torch

SHARD_INDEX = ".metadata"  # torch.distributed.checkpoint's index of the shards
_METADATA = "torch.distributed.checkpoint.metadata"
_METADATA_NAMES = (
    "Metadata",
    "MetadataIndex",
    "StorageMeta",
    "TensorProperties",
    "TensorStorageMetadata",
    "BytesStorageMetadata",
    "ChunkStorageMetadata",
    "_MEM_FORMAT_ENCODING",
)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")


class ShardIndexError(pickle.UnpicklingError):
    """The index names something that is not data, or says something about its shards that is
    not so."""


def allowed_names() -> dict[tuple[str, str], Any]:
    """Every (module, name) the index may name, with the object zoo gives for it."""
    from torch.distributed.checkpoint import filesystem, metadata

    table: dict[tuple[str, str], Any] = {(_METADATA, name): getattr(metadata, name) for name in _METADATA_NAMES}
    table[("torch.distributed.checkpoint.filesystem", "_StorageInfo")] = filesystem._StorageInfo
    table[("torch.serialization", "_get_layout")] = torch.serialization._get_layout
    table[("collections", "OrderedDict")] = __import__("collections").OrderedDict
    table[("pathlib", "PosixPath")] = PosixPath
    table[("pathlib", "PurePosixPath")] = PurePosixPath
    table[("torch", "Size")] = torch.Size
    for name, value in vars(torch).items():
        if isinstance(value, torch.dtype):
            table[("torch", name)] = value
    return table


class _ShardIndexUnpickler(pickle.Unpickler):
    """Admits the names of `allowed_names` and nothing else."""

    def __init__(self, file, table: dict[tuple[str, str], Any]) -> None:
        super().__init__(file)
        self._table = table

    def find_class(self, module: str, name: str) -> Any:
        value = self._table.get((module, name))
        if value is None:  # a dotted name is never in the table: it is refused here, unresolved
            raise ShardIndexError(f"{module}.{name} is not allowed in a checkpoint's shard index")
        return value


def read_index(directory: Path):
    """The checked `Metadata` of the sharded checkpoint in `directory`."""
    from torch.distributed.checkpoint.metadata import Metadata

    index = directory / SHARD_INDEX
    if index.is_symlink() or not index.is_file():
        raise ShardIndexError(f"its {SHARD_INDEX} is a link or not a file")
    with open(index, "rb") as f:
        metadata = _ShardIndexUnpickler(f, allowed_names()).load()
    if type(metadata) is not Metadata:
        raise ShardIndexError(f"its {SHARD_INDEX} holds a {type(metadata).__name__}, not torch's index of shards")
    try:
        check_index(metadata, directory)
    except (AttributeError, TypeError) as exc:  # an index rebuilt with other fields than torch writes
        raise ShardIndexError(f"its {SHARD_INDEX} is not torch's index of shards ({type(exc).__name__})") from None
    return metadata


def check_index(metadata, directory: Path) -> None:
    """What the index says of its shards holds (see the module docstring)."""
    from torch.distributed.checkpoint.filesystem import _StorageInfo
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata, TensorStorageMetadata

    storage = metadata.storage_data
    if not isinstance(storage, dict) or not isinstance(metadata.state_dict_metadata, dict):
        raise ShardIndexError(f"its {SHARD_INDEX} does not map items to shards")
    sizes: dict[str, int] = {}
    for info in storage.values():
        if type(info) is not _StorageInfo:
            raise ShardIndexError(f"its {SHARD_INDEX} holds a {type(info).__name__} where a shard's location belongs")
        name = info.relative_path
        if not isinstance(name, str) or not _PLAIN_NAME.fullmatch(name) or name in (".", ".."):
            raise ShardIndexError(f"its {SHARD_INDEX} names a shard {name!r} that is not a file of the checkpoint")
        if name not in sizes:
            shard = directory / name
            if shard.is_symlink() or not shard.is_file():
                raise ShardIndexError(f"its {SHARD_INDEX} names a shard {name!r} that is a link or missing")
            sizes[name] = shard.stat().st_size
        if not all(_count(v) for v in (info.offset, info.length)):
            raise ShardIndexError(f"its {SHARD_INDEX} places an item at offset {info.offset!r}, length {info.length!r}")
        if info.offset + info.length > sizes[name]:
            raise ShardIndexError(
                f"its shard {name!r} ends before the bytes its {SHARD_INDEX} places there "
                f"(the shard is truncated, or the index is not its own)"
            )
        if info.transform_descriptors:
            raise ShardIndexError(f"its {SHARD_INDEX} asks for load transforms ({list(info.transform_descriptors)})")
    declared = 0
    for item in metadata.state_dict_metadata.values():
        if type(item) is TensorStorageMetadata:
            size, dtype = item.size, item.properties.dtype
            if (
                not isinstance(size, torch.Size)
                or not all(_count(n) for n in size)
                or not isinstance(dtype, torch.dtype)
            ):
                raise ShardIndexError(f"its {SHARD_INDEX} declares a tensor of size {size!r} and dtype {dtype!r}")
            declared += _numel(size) * dtype.itemsize
        elif type(item) is not BytesStorageMetadata:
            raise ShardIndexError(
                f"its {SHARD_INDEX} holds a {type(item).__name__} where an item's description belongs"
            )
    held = sum(sizes.values())
    if declared > held:
        raise ShardIndexError(
            f"its {SHARD_INDEX} declares {declared:,} bytes of tensors, but its shards hold {held:,} bytes"
        )


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, (bool, enum.Enum)) and value >= 0


def _numel(size: torch.Size) -> int:
    n = 1
    for d in size:
        n *= int(d)
    return n


def safe_shard_reader(path: str | Path) -> Any:
    """A `FileSystemReader` that reads its index with `read_index`."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    class _Reader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any):
            metadata = read_index(Path(self.path))
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return _Reader(str(path))
