"""A resume trains on the data files its checkpoint was trained on, or says so.

Every checkpoint carries the identity of the run's local data files (`zoo.data.identity`:
path, size, SHA-256) under `zoo_data_files`, with the changes accepted so far. A resume whose
files differ is refused on one line naming the first file that changed, and nothing of the run
is written; `data.allow_changed_files=true` resumes anyway, says so on one line, and records
each change (file, old and new identity, the step) in the checkpoints written from then on and
in summary.json (`data_files_changed`)."""

from __future__ import annotations

import logging
from typing import Any

import lightning as L

from zoo.config.schema.data import DataConfig
from zoo.data.identity import changed_files, data_files, describe
from zoo.training.resume.match import ResumeMismatch

log = logging.getLogger("zoo")

KEY = "zoo_data_files"  # {"files": data_files(...), "changed": [accepted changes]} in a checkpoint
SUMMARY_KEY = "data_files_changed"  # the accepted changes, in summary.json


def check_data_files(checkpoint: dict, where: str, cfg: DataConfig) -> tuple[dict, ...]:
    """The changes of data files accepted so far (the checkpoint's, and this resume's when
    `data.allow_changed_files` accepts them). ResumeMismatch (one line, nothing written) for a
    data file that differs from the one the checkpoint was trained on. A checkpoint without the
    record (an earlier zoo, or a source without local files) has nothing to compare."""
    record = checkpoint.get(KEY)
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        return ()
    earlier = tuple(c for c in record.get("changed") or () if isinstance(c, dict))
    current = data_files(cfg) or {}
    changes = changed_files(record["files"], current)
    if not changes:
        return earlier
    more = f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""
    if not cfg.allow_changed_files:
        raise ResumeMismatch(
            f"{describe(changes[0])}{more} since {where} was written: resuming would train on other data; "
            f"put the file back, start a new run in another hydra.run.dir, or resume on the changed data "
            f"with data.allow_changed_files=true (recorded in summary.json)"
        )
    step = checkpoint.get("global_step")
    log.warning(
        "data.allow_changed_files=true: resuming at step %s although %s%s; recorded in summary.json",
        step,
        describe(changes[0]),
        more,
    )
    return earlier + tuple({**change, "resumed_at_step": step} for change in changes)


class DataFilesRecord(L.Callback):
    """Writes the identity of the run's data files, and the changes accepted on resume, into
    every checkpoint (`KEY`). The identity is taken once, when training starts."""

    def __init__(self, cfg: DataConfig, changed: tuple[dict, ...] = ()) -> None:
        self.cfg = cfg
        self.changed = list(changed)
        self.files: dict[str, Any] | None = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        self.files = data_files(self.cfg)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        if self.files is not None:
            checkpoint[KEY] = {"files": self.files, "changed": self.changed}
