"""Prepared language-model data: a split tokenized once into memory-mapped token shards.

    <cache>/prepared/<key>/
        index.json               format, dtype, and per split its shards: file, tokens,
                                 documents, SHA-256
        train-00000.bin ...      the split's documents (each followed by eos) in order, as one
        validation-00000.bin     flat array of uint16 (vocabulary <= 65,536) or uint32 ids

`key` names what the ids depend on: the corpus (its content, the split, the text column) and
the tokenizer's fingerprint. The shards are numpy memmaps (nanoGPT's `train.bin`, cut into
shards): a training process maps them read-only, so its memory does not grow with the corpus,
and every rank on a machine shares one copy in the page cache.

Preparation tokenizes shards of `DOCS_PER_SHARD` documents in parallel worker processes and
writes each shard under a temporary name, renamed when complete, into `<key>.partial/`; a
preparation that is interrupted (killed, out of disk) leaves only complete shards there, which
the next one keeps, and nothing is read as prepared until `index.json` is written and the
directory renamed to `<key>`. One process prepares at a time (a lock file); the others wait
and then read the entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from zoo.data.errors import DataError
from zoo.data.integrity import file_digest, notice

FORMAT = 1
INDEX = "index.json"
DOCS_PER_SHARD = 50_000
BATCH = 1_000  # documents per encode_batch call
SPLITS = ("train", "validation")


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits in 16 bits, else uint32."""
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.uint32)


def default_num_proc() -> int:
    """The CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class TokenStream:
    """The concatenated ids of a prepared split: `len()` tokens, sliced like an array
    (`stream[a:b]` -> int64 numpy array), read from memory-mapped shards."""

    def __init__(self, files: Sequence[Path], dtype: np.dtype):
        self.files = [Path(f) for f in files]
        self.dtype = np.dtype(dtype)
        self._maps = [np.memmap(f, dtype=self.dtype, mode="r") if f.stat().st_size else
                      np.zeros(0, dtype=self.dtype) for f in self.files]
        sizes = [len(m) for m in self._maps]
        self.offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, index: slice) -> np.ndarray:
        if not isinstance(index, slice) or index.step not in (None, 1):
            raise TypeError("a TokenStream is read in contiguous slices")
        start, stop, _ = index.indices(len(self))
        if stop <= start:
            return np.zeros(0, dtype=np.int64)
        first = int(np.searchsorted(self.offsets, start, side="right")) - 1
        parts, at = [], start
        for shard in range(first, len(self._maps)):
            if at >= stop:
                break
            lo = at - int(self.offsets[shard])
            hi = min(stop, int(self.offsets[shard + 1])) - int(self.offsets[shard])
            parts.append(self._maps[shard][lo:hi])
            at = int(self.offsets[shard]) + hi
        return np.concatenate(parts).astype(np.int64) if len(parts) > 1 else parts[0].astype(np.int64)

    def __getstate__(self):  # DataLoader workers re-map the files instead of copying them
        return {"files": self.files, "dtype": self.dtype.str}

    def __setstate__(self, state):
        self.__init__(state["files"], np.dtype(state["dtype"]))


@dataclass
class Prepared:
    """An opened entry: its directory and a `TokenStream` per split."""

    directory: Path
    index: dict
    streams: dict[str, TokenStream]
    built: bool  # prepared by this call (False: found in the cache)

    def counts(self, split: str) -> np.ndarray:
        """How often each id occurs in the split (int64 [V])."""
        return np.load(self.directory / f"{split}.counts.npy")


def entry_dir(cache: Path, key: str) -> Path:
    return Path(cache) / "prepared" / key


def open_prepared(directory: Path, *, verify: bool = True) -> Optional[Prepared]:
    """The entry in `directory`, or None when there is none. `verify` checks every shard against
    its recorded digest; a damaged entry is removed (one line) and None returned, so that it is
    prepared again."""
    directory = Path(directory)
    index_path = directory / INDEX
    if not index_path.is_file():
        return None
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
        if index.get("format") != FORMAT:
            raise ValueError(f"format {index.get('format')!r}, expected {FORMAT}")
        dtype = np.dtype(index["dtype"])
        streams = {}
        for split in SPLITS:
            shards = index["splits"][split]["shards"]
            files = [directory / s["file"] for s in shards]
            for shard, f in zip(shards, files):
                if f.stat().st_size != shard["tokens"] * dtype.itemsize:
                    raise ValueError(f"{f.name} holds {f.stat().st_size} bytes, expected "
                                     f"{shard['tokens'] * dtype.itemsize}")
                if verify and file_digest(f) != shard["sha256"]:
                    raise ValueError(f"{f.name} does not match the digest recorded when it was written")
            streams[split] = TokenStream(files, dtype)
            if np.load(directory / f"{split}.counts.npy").sum() != sum(s["tokens"] for s in shards):
                raise ValueError(f"{split}.counts.npy does not add up to the split's tokens")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _discard(directory, f"prepared data {directory} is damaged ({exc})")
        return None
    return Prepared(directory, index, streams, built=False)


def prepare(directory: Path, splits: dict, tokenizer, text_column: str, *,
            num_proc: Optional[int] = None, describe: str = "the corpus",
            docs_per_shard: int = DOCS_PER_SHARD) -> Prepared:
    """The entry in `directory`: opened when it exists, else made from `splits` ({"train": ds,
    "validation": ds} of raw text) with `tokenizer`, in `num_proc` processes."""
    directory = Path(directory)
    found = open_prepared(directory)
    if found is not None:
        return found
    from zoo.data.tokenizers.registry import _exclusive

    directory.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(directory.parent / f".{directory.name}.lock"):
        found = open_prepared(directory)  # another process prepared it while this one waited
        if found is not None:
            return found
        work = directory.with_name(directory.name + ".partial")
        work.mkdir(exist_ok=True)
        dtype = token_dtype(tokenizer.vocab_size)
        index = {"format": FORMAT, "dtype": dtype.name, "vocab_size": tokenizer.vocab_size,
                 "tokenizer": tokenizer.fingerprint(), "text_column": text_column, "splits": {}}
        for split in SPLITS:
            index["splits"][split] = _prepare_split(work, split, splits[split], tokenizer, text_column,
                                                    dtype, num_proc or default_num_proc(), describe,
                                                    docs_per_shard)
        for split in SPLITS:
            (work / f"{split}.shards.json").unlink(missing_ok=True)
        (work / INDEX).write_text(json.dumps(index, indent=1))
        _fsync_dir(work)
        os.replace(work, directory)
    opened = open_prepared(directory, verify=False)
    opened.built = True
    return opened


# ---- preparation ---------------------------------------------------------------------------

_WORKER: dict = {}


def _init_worker(ds, tokenizer, text_column, dtype_name) -> None:
    _WORKER.update(ds=ds, tokenizer=tokenizer, text_column=text_column, dtype=np.dtype(dtype_name))


def _tokenize_shard(job: tuple) -> dict:
    """Tokenize documents [lo, hi) of the split into `path` (written under a temporary name,
    then renamed); -> the shard's index record."""
    path, lo, hi = job
    ds, tokenizer = _WORKER["ds"], _WORKER["tokenizer"]
    column, dtype = _WORKER["text_column"], _WORKER["dtype"]
    tmp = Path(f"{path}.tmp-{os.getpid()}")
    tokens = docs = 0
    digest = hashlib.sha256()
    counts = np.zeros(tokenizer.vocab_size, dtype=np.int64)
    with open(tmp, "wb") as out:
        for start in range(lo, hi, BATCH):
            texts = ds[start:min(hi, start + BATCH)][column]
            texts = ["" if t is None else t if isinstance(t, str) else str(t) for t in texts]
            flat = tokenizer.encode_documents(texts, dtype)
            data = flat.tobytes()
            out.write(data)
            digest.update(data)
            counts += np.bincount(flat, minlength=len(counts))[:len(counts)]
            tokens += len(flat)
            docs += len(texts)
        out.flush()
        os.fsync(out.fileno())
    np.save(counts_file(path), counts)
    os.replace(tmp, path)
    return {"file": Path(path).name, "tokens": tokens, "documents": docs, "sha256": digest.hexdigest()}


def counts_file(shard: str | Path) -> Path:
    """Per-shard token counts (int64 [V]), kept beside a shard while it is prepared."""
    return Path(f"{shard}.counts.npy")


def _prepare_split(work: Path, split: str, ds, tokenizer, text_column: str, dtype: np.dtype,
                   num_proc: int, describe: str, docs_per_shard: int) -> dict:
    n = len(ds)
    jobs = [(str(work / f"{split}-{i:05d}.bin"), lo, min(n, lo + docs_per_shard))
            for i, lo in enumerate(range(0, n, docs_per_shard))] or [(str(work / f"{split}-00000.bin"), 0, 0)]
    done: dict[str, dict] = {}
    records = _read_records(work, split)
    for path, lo, hi in jobs:  # shards a stopped preparation completed are kept
        record = records.get(Path(path).name)
        if record and record.get("range") == [lo, hi] and Path(path).is_file() and \
                counts_file(path).is_file() and file_digest(path) == record["sha256"]:
            done[path] = record
    todo = [job for job in jobs if job[0] not in done]
    if todo:
        workers = max(1, min(num_proc, len(todo)))
        bar = _progress(sum(hi - lo for _, lo, hi in todo), f"preparing {split} of {describe} "
                        f"({workers} process{'es' if workers > 1 else ''})")
        results = _run(todo, ds, tokenizer, text_column, dtype, workers)
        for (path, lo, hi), record in results:
            record["range"] = [lo, hi]
            done[path] = record
            records[Path(path).name] = record
            _write_records(work, split, records)
            bar.update(hi - lo)
        bar.close()
    shards = [done[path] for path, _, _ in jobs]
    counts = sum(np.load(counts_file(path)) for path, _, _ in jobs)
    np.save(work / f"{split}.counts.npy", counts)
    for path, _, _ in jobs:
        counts_file(path).unlink()
    return {"shards": shards, "tokens": sum(s["tokens"] for s in shards),
            "documents": sum(s["documents"] for s in shards)}


def _run(jobs, ds, tokenizer, text_column, dtype, workers):
    """(job, record) for each job as it completes: in this process, or in `workers` forked
    processes (the memory-mapped dataset and the tokenizer are inherited, not copied)."""
    args = (ds, tokenizer, text_column, dtype.name)
    if workers == 1:
        _init_worker(*args)
        for job in jobs:
            yield job, _tokenize_shard(job)
        return
    import multiprocessing as mp

    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    with mp.get_context(method).Pool(workers, initializer=_init_worker, initargs=args) as pool:
        for job, record in zip(jobs, pool.imap(_tokenize_shard, jobs)):
            yield job, record


def _read_records(work: Path, split: str) -> dict:
    try:
        return json.loads((work / f"{split}.shards.json").read_text())
    except (OSError, ValueError):
        return {}


def _write_records(work: Path, split: str, records: dict) -> None:
    tmp = work / f".{split}.shards.json.tmp"
    tmp.write_text(json.dumps(records))
    os.replace(tmp, work / f"{split}.shards.json")


def _progress(total: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=" docs", disable=None, file=sys.stderr)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _discard(directory: Path, why: str) -> None:
    aside = directory.with_name(f".{directory.name}-damaged-{os.getpid()}")
    try:
        os.replace(directory, aside)
    except OSError as exc:
        raise DataError(f"{why}; it cannot be removed ({exc.strerror}): delete it, or point "
                        f"data.cache_dir elsewhere") from None
    shutil.rmtree(aside, ignore_errors=True)
    notice(f"{why}; preparing it again")
