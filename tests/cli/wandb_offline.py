"""Read an offline W&B run directory (`wandb/offline-run-DATE-ID/run-ID.wandb`) the way `wandb
sync` does: W&B's record log (a LevelDB-style log of 32 KiB blocks after a 7-byte header), each
record one of W&B's own protobuf `Record` messages (`wandb.proto.wandb_internal_pb2`)."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = struct.Struct("<4sHB")  # ":W&B", magic 0xBEE1, version
RECORD = struct.Struct("<IHB")  # checksum, length, type
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def raw_records(path: Path) -> Iterator[bytes]:
    data = Path(path).read_bytes()
    ident, magic, _version = HEADER.unpack_from(data, 0)
    assert ident == b":W&B" and magic == 0xBEE1, f"{path} is not a W&B run file"
    pos, pending = HEADER.size, b""
    while pos + RECORD.size <= len(data):
        left = BLOCK - pos % BLOCK
        if left < RECORD.size:  # the rest of a block too short for a record header is padding
            pos += left
            continue
        checksum, length, kind = RECORD.unpack_from(data, pos)
        if kind == 0 and length == 0:
            pos += left
            continue
        payload = data[pos + RECORD.size : pos + RECORD.size + length]
        assert zlib.crc32(bytes([kind]) + payload) & 0xFFFFFFFF == checksum, f"bad record checksum in {path}"
        pos += RECORD.size + length
        if kind == FULL:
            yield payload
        elif kind == FIRST:
            pending = payload
        elif kind == MIDDLE:
            pending += payload
        elif kind == LAST:
            yield pending + payload
            pending = b""


def _items(items) -> dict[str, Any]:
    return {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in items}


@dataclass
class OfflineRun:
    """What an offline run recorded: its run record, config, history rows, final summary, exit
    code, and whether it was marked preempting (W&B's state for a run that will be resumed)."""

    run_id: str = ""
    project: str = ""
    group: str = ""
    job_type: str = ""
    name: str = ""
    config: dict = field(default_factory=dict)
    history: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    exit_code: int | None = None
    preempting: bool = False


def read_offline_run(directory: Path) -> OfflineRun:
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = Path(directory).glob("run-*.wandb")
    run = OfflineRun()
    for payload in raw_records(path):
        record = pb.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.run_id, run.project, run.group, run.job_type, run.name = (
                r.run_id,
                r.project,
                r.run_group,
                r.job_type,
                r.display_name,
            )
            run.config.update(_items(r.config.update))
        elif kind == "config":
            run.config.update(_items(record.config.update))
        elif kind == "history":
            run.history.append(_items(record.history.item))
        elif kind == "summary":
            run.summary.update(_items(record.summary.update))
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
        elif kind == "preempting":
            run.preempting = True
    return run
