"""One line for the failures a user fixes outside zoo (storage that cannot be written, memory
that cannot be had), found anywhere in an exception's chain."""

from __future__ import annotations

import errno
from pathlib import Path

from zoo.config.records.rundir import RunDir

STORAGE_ERRORS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}


def known_failure(exc: BaseException, run_dir: Path) -> str | None:
    """The line for `exc` (torch reports a full disk as "unexpected pos ..." caused by the
    OSError, so the whole chain is read); None for anything else, a bug."""
    seen: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and link not in seen:
        seen.append(link)
        link = link.__cause__ or link.__context__
    for err in seen:
        if isinstance(err, OSError) and err.errno in STORAGE_ERRORS:
            where = err.filename or run_dir
            last = RunDir(run_dir).last
            keep = (
                f"the last complete checkpoint {last} is kept; rerun the same command to resume from it"
                if last.exists()
                else "no checkpoint had been written yet"
            )
            return (
                f"cannot write {where}: {STORAGE_ERRORS[err.errno]}; free space or point "
                f"hydra.run.dir / ZOO_CACHE at a writable disk ({keep})"
            )
    for err in seen:
        text = str(err)
        if (
            isinstance(err, MemoryError)
            or "can't allocate memory" in text
            or type(err).__name__ == "OutOfMemoryError"
            or "CUDA out of memory" in text
        ):
            device = "GPU" if "CUDA" in text or type(err).__name__ == "OutOfMemoryError" else "host"
            return (
                f"out of {device} memory ({type(err).__name__}); lower data.max_device_batch_size "
                f"(gradient accumulation keeps the global batch), data.seq_len or the model size"
            )
    return None
