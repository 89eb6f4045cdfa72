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
writes each shard under a temporary name, renamed when complete (then its record), into
`<key>.partial/`; a preparation that is interrupted (killed, out of disk) leaves only complete
shards there, which the next one keeps, and nothing is read as prepared until `index.json` is
written and the directory renamed to `<key>`. One process prepares at a time (a lock file); the
others wait and then read the entry. A very large corpus can be prepared by several processes or
SLURM array tasks, each taking every n-th shard (`part=(i, n)`, `zoo-prepare part=I/N`); the one
that finds every shard done writes the entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zoo.data.cache import exclusive
from zoo.data.integrity import discard, file_digest, fsync_dir, notice

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
        self._maps = [
            np.memmap(f, dtype=self.dtype, mode="r") if f.stat().st_size else np.zeros(0, dtype=self.dtype)
            for f in self.files
        ]
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
        TokenStream.__init__(self, state["files"], np.dtype(state["dtype"]))


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


def _shard_name(name) -> str:
    """A shard's file name from the index: a plain name inside the entry, never a path."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name or "\x00" in name:
        raise ValueError(f"shard {name!r} is not a file name inside the entry")
    return name


def entry_dir(cache: Path, key: str) -> Path:
    return Path(cache) / "prepared" / key


def open_prepared(directory: Path, *, verify: bool = True, vocab_size: int | None = None) -> Prepared | None:
    """The entry in `directory`, or None when there is none. Shards are plain files named inside
    the entry; `verify` checks every shard against its recorded digest and every id against the
    vocabulary (the entry's, and `vocab_size` when given: the tokenizer's); a damaged entry is
    removed (one line) and None returned, so that it is prepared again."""
    directory = Path(directory)
    index_path = directory / INDEX
    if not index_path.is_file():
        return None
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
        if index.get("format") != FORMAT:
            raise ValueError(f"format {index.get('format')!r}, expected {FORMAT}")
        dtype = np.dtype(index["dtype"])
        vocab = int(index["vocab_size"])
        if vocab_size is not None and vocab != vocab_size:
            raise ValueError(f"its vocabulary has {vocab} ids, the tokenizer's {vocab_size}")
        streams = {}
        for split in SPLITS:
            shards = index["splits"][split]["shards"]
            files = [directory / _shard_name(s["file"]) for s in shards]
            for shard, f in zip(shards, files):
                if f.is_symlink() or not f.is_file():
                    raise ValueError(f"{f.name} is not a file of the entry")
                if f.stat().st_size != shard["tokens"] * dtype.itemsize:
                    raise ValueError(
                        f"{f.name} holds {f.stat().st_size} bytes, expected {shard['tokens'] * dtype.itemsize}"
                    )
                if verify and file_digest(f) != shard["sha256"]:
                    raise ValueError(f"{f.name} does not match the digest recorded when it was written")
                if verify and shard["tokens"] and int(np.memmap(f, dtype=dtype, mode="r").max()) >= vocab:
                    raise ValueError(f"{f.name} holds ids outside the vocabulary of {vocab}")
            streams[split] = TokenStream(files, dtype)
            counts = np.load(directory / f"{split}.counts.npy")
            if len(counts) != vocab or counts.sum() != sum(s["tokens"] for s in shards):
                raise ValueError(f"{split}.counts.npy does not add up to the split's tokens")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _discard(directory, f"prepared data {directory} is damaged ({exc})")
        return None
    return Prepared(directory, index, streams, built=False)


def prepare(
    directory: Path,
    splits: dict,
    tokenizer,
    text_column: str,
    *,
    num_proc: int | None = None,
    describe: str = "the corpus",
    docs_per_shard: int = DOCS_PER_SHARD,
    part: tuple[int, int] | None = None,
) -> Prepared | None:
    """The entry in `directory`: opened when it exists, else made from `splits` ({"train": ds,
    "validation": ds} of raw text) with `tokenizer`, in `num_proc` processes.

    `part=(i, n)`: only shards i, i + n, i + 2n, ... of each split (one of n array tasks, or n
    machines on a shared file system); the task that finds every shard done writes the entry.
    None when shards of other parts are still missing."""
    directory = Path(directory)
    found = open_prepared(directory)
    if found is not None:
        return found
    directory.parent.mkdir(parents=True, exist_ok=True)
    work = directory.with_name(directory.name + ".partial")
    dtype = token_dtype(tokenizer.vocab_size)
    jobs = {split: _jobs(work, split, len(splits[split]), docs_per_shard) for split in SPLITS}
    workers = num_proc or default_num_proc()
    lock = directory.parent / f".{directory.name}.lock"

    def tokenize(mine) -> None:
        work.mkdir(exist_ok=True)
        for split in SPLITS:
            done = _done(work, jobs[split], dtype)
            todo = [job for k, job in enumerate(jobs[split]) if job[0] not in done and mine(k)]
            _tokenize(todo, splits[split], tokenizer, text_column, dtype, workers, f"preparing {split} of {describe}")

    if part is None:
        with exclusive(lock):  # one preparer; the others wait, then find the entry
            found = open_prepared(directory)
            if found is not None:
                return found
            tokenize(lambda k: True)
            return _assemble(work, directory, jobs, tokenizer, text_column, dtype)
    i, n = part
    tokenize(lambda k: k % n == i)
    with exclusive(lock):
        found = open_prepared(directory)
        if found is not None:
            return found
        if all(len(_done(work, jobs[s], dtype)) == len(jobs[s]) for s in SPLITS):
            return _assemble(work, directory, jobs, tokenizer, text_column, dtype)
    return None


def _jobs(work: Path, split: str, n: int, docs_per_shard: int) -> list[tuple[str, int, int]]:
    """(shard file, first document, end document) of each shard of a split of n documents."""
    return [
        (str(work / f"{split}-{i:05d}.bin"), lo, min(n, lo + docs_per_shard))
        for i, lo in enumerate(range(0, n, docs_per_shard))
    ] or [(str(work / f"{split}-00000.bin"), 0, 0)]


def _done(work: Path, jobs, dtype: np.dtype) -> dict[str, dict]:
    """The shards of `jobs` a preparation completed (this one, a stopped one, or another part):
    file, counts and record present, of the recorded range and size."""
    done = {}
    for path, lo, hi in jobs:
        try:
            record = json.loads(record_file(path).read_text())
            complete = (
                record.get("range") == [lo, hi]
                and counts_file(path).is_file()
                and Path(path).stat().st_size == record["tokens"] * dtype.itemsize
            )
        except (OSError, ValueError, KeyError):
            complete = False
        if complete:
            done[path] = record
    return done


def _tokenize(todo, ds, tokenizer, text_column: str, dtype: np.dtype, num_proc: int, desc: str) -> None:
    if not todo:
        return
    workers = max(1, min(num_proc, len(todo)))
    bar = _progress(sum(hi - lo for _, lo, hi in todo), f"{desc} ({workers} process{'es' if workers > 1 else ''})")
    for (path, lo, hi), record in _run(todo, ds, tokenizer, text_column, dtype, workers):
        record["range"] = [lo, hi]
        tmp = Path(f"{record_file(path)}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, record_file(path))
        bar.update(hi - lo)
    bar.close()


def _assemble(work: Path, directory: Path, jobs: dict, tokenizer, text_column: str, dtype: np.dtype) -> Prepared:
    """Index, token counts and the rename that makes the entry visible."""
    index = {
        "format": FORMAT,
        "dtype": dtype.name,
        "vocab_size": tokenizer.vocab_size,
        "tokenizer": tokenizer.fingerprint(),
        "text_column": text_column,
        "splits": {},
    }
    for split in SPLITS:
        done = _done(work, jobs[split], dtype)
        shards = [{k: v for k, v in done[path].items() if k != "range"} for path, _, _ in jobs[split]]
        counts = sum(np.load(counts_file(path)) for path, _, _ in jobs[split])
        np.save(work / f"{split}.counts.npy", counts)
        for path, _, _ in jobs[split]:
            counts_file(path).unlink()
            record_file(path).unlink()
        index["splits"][split] = {
            "shards": shards,
            "tokens": sum(r["tokens"] for r in shards),
            "documents": sum(r["documents"] for r in shards),
        }
    (work / INDEX).write_text(json.dumps(index, indent=1))
    fsync_dir(work)
    os.replace(work, directory)
    opened = open_prepared(directory, verify=False)
    assert opened is not None  # the entry was just written there
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
            texts = ds[start : min(hi, start + BATCH)][column]
            texts = ["" if t is None else t if isinstance(t, str) else str(t) for t in texts]
            flat = tokenizer.encode_documents(texts, dtype)
            data = flat.tobytes()
            out.write(data)
            digest.update(data)
            counts += np.bincount(flat, minlength=len(counts))[: len(counts)]
            tokens += len(flat)
            docs += len(texts)
        out.flush()
        os.fsync(out.fileno())
    np.save(counts_file(path), counts)
    os.replace(tmp, path)
    return {"file": Path(path).name, "tokens": tokens, "documents": docs, "sha256": digest.hexdigest()}


def record_file(shard: str | Path) -> Path:
    """A finished shard's record (range, tokens, documents, digest), written after the shard."""
    return Path(f"{shard}.json")


def counts_file(shard: str | Path) -> Path:
    """Per-shard token counts (int64 [V]), kept beside a shard while it is prepared."""
    return Path(f"{shard}.counts.npy")


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


def _progress(total: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=" docs", disable=None, file=sys.stderr)


def _discard(directory: Path, why: str) -> None:
    discard(directory, "the prepared data", "data.cache_dir")
    notice(f"{why}; preparing it again")
