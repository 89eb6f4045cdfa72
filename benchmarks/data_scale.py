"""Data at scale (not a test): time to first step, tokenization throughput and peak memory per
rank on local corpora of growing size, cold (empty cache) and warm (prepared shards cached).

    python benchmarks/data_scale.py --sizes 20,100,1000 --work /tmp/zoo-data-bench \\
        --out benchmarks/results/data_scale.json

Corpora: real English (King James Bible verses and CPython's pydoc topics) resampled with a
seed into documents of 1 to 12 verses, one document per line, until the file has the size asked
for. Each size is trained with `zoo-train data=local tokenizer=byte trainer.max_steps=1` (a tiny
model; the wall time of that whole command is the time to the first step, start-up and the
final validation batch included), once on an empty cache and once warm; the largest also under
`trainer=ddp_cpu` (2 ranks) warm; each figure is the median of `--repeats` runs. Peak memory is each process's high-water resident set
(VmHWM), polled from /proc. Tokenization throughput is `zoo.data.prepared.prepare` on the
100 MB corpus with 1 and 2 processes, byte and SentencePiece tokenizers, beside the reference
approach of nanoGPT's `prepare.py` (`datasets.map(num_proc=N)`, then one `np.memmap` written
batch by batch) with the same tokenizer.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

MODEL = [
    "model.d_model=64",
    "model.n_heads=2",
    "model.n_layers=2",
    "model.vocab_size=300",
    "model.max_seq_len=256",
    "data.seq_len=256",
    "data.global_batch_size=8",
    "trainer.max_steps=1",
    "trainer.val_check_interval=1",
    "trainer.limit_val_batches=1",
    "scheduler.warmup_steps=0",
    "callbacks.progress_bar=none",
    "tokenizer=byte",
]


def make_corpus(path: Path, megabytes: int) -> Path:
    """Documents of 1-12 consecutive KJV verses or one pydoc topic, in seeded random order."""
    if path.is_file() and path.stat().st_size >= megabytes << 20:
        return path
    from pydoc_data.topics import topics

    from zoo.data.corpora import kjv_verses

    verses = kjv_verses().texts
    docs = [t.strip().replace("\n", " ") for t in topics.values()]
    rng = random.Random(0)
    target = megabytes << 20
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < target:
            if rng.random() < 0.05:
                line = rng.choice(docs)
            else:
                start = rng.randrange(len(verses) - 12)
                line = " ".join(verses[start : start + rng.randint(1, 12)])
            data = line + "\n"
            out.write(data)
            written += len(data.encode())
    return path


class PeakMemory:
    """High-water resident set (VmHWM) of a process and all its descendants, polled."""

    def __init__(self, root: int):
        self.root, self._stop = root, threading.Event()
        self.peaks: dict[str, int] = {}
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _tree(self) -> list[int]:
        pids, frontier = [self.root], [self.root]
        while frontier:
            pid = frontier.pop()
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    kids = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
                    pids += map(int, kids)
                    frontier += map(int, kids)
            except OSError:
                pass
        return pids

    def _poll(self) -> None:
        while not self._stop.is_set():
            for pid in self._tree():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                except OSError:
                    continue
                rank = next((e.split(b"=")[1].decode() for e in environ if e.startswith(b"LOCAL_RANK=")), None)
                # the command's own process is rank 0; a launched rank starts with LOCAL_RANK in its
                # environment; anything else (forked tokenizer workers) is a helper
                label = "rank 0" if pid == self.root else f"rank {rank}" if rank else f"helper {pid}"
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        kib = int(line.split()[1])
                        self.peaks[label] = max(self.peaks.get(label, 0), kib)
            time.sleep(0.1)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return self.peaks


def train(corpus: Path, cache: Path, run: Path, *extra: str) -> dict:
    import shutil

    shutil.rmtree(run, ignore_errors=True)  # a fresh run each time, never a resume
    env = dict(os.environ, ZOO_CACHE=str(cache), OMP_NUM_THREADS="1")
    env.pop("ZOO_RUN_TIME", None)
    cmd = [
        sys.executable,
        "-m",
        "zoo.cli.train",
        *MODEL,
        "data=local",
        f"data.path={corpus}",
        f"hydra.run.dir={run}",
        *extra,
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    memory = PeakMemory(proc.pid)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    peaks = memory.stop()
    if proc.returncode != 0:
        raise SystemExit(f"zoo-train failed:\n{err[-3000:]}")
    ranks = [kib for label, kib in sorted(peaks.items()) if label.startswith("rank")]
    helpers = [kib for label, kib in peaks.items() if label.startswith("helper")]
    summary = json.loads((run / "summary.json").read_text())
    return {
        "wall_s": round(wall, 1),
        "rank_peak_rss_mib": [round(k / 1024) for k in ranks],
        "tokenizer_process_peak_rss_mib": round(max(helpers) / 1024) if helpers else None,
        "val_loss": summary["metrics"].get("val/loss"),
    }


def median_of(rows: list[dict]) -> dict:
    """Each figure's median over repeated runs (per rank for the memory lists)."""
    out: dict[str, Any] = {}
    for key in rows[0]:
        values = [r[key] for r in rows]
        if isinstance(values[0], list):
            out[key] = [statistics.median(v) for v in zip(*values)]
        elif values[0] is None or isinstance(values[0], str):
            out[key] = values[0]
        else:
            out[key] = statistics.median(values)
    out["runs"] = len(rows)
    return out


def throughput(corpus: Path, work: Path, kind: str, num_proc: int) -> dict:
    """tokens/s of zoo's preparation (from the loaded splits; the load is not timed)."""
    code = f"""
import json, time, sys
from pathlib import Path
from zoo.data import build_datamodule
cfg = {{"source": "local", "path": {str(corpus)!r}, "cache_dir": {str(work / ("tp-" + kind))!r}}}
tok = {{"kind": {kind!r}, "cache_dir": {str(work / ("tp-" + kind))!r}}}
dm = build_datamodule(cfg, tok, "causal_lm", batch_size=1)
splits = dm._raw_splits(); tokenizer = dm._build_tokenizer()
from zoo.data.prepared import prepare
import shutil
target = Path({str(work)!r}) / "tp-entry-{kind}-{num_proc}"
shutil.rmtree(target, ignore_errors=True)
start = time.perf_counter()
p = prepare(target, splits, tokenizer, "text", num_proc={num_proc})
seconds = time.perf_counter() - start
tokens = sum(p.index["splits"][s]["tokens"] for s in p.index["splits"])
print(json.dumps({{"tokens": tokens, "seconds": seconds}}))
"""
    return _timed_python(code)


def nanogpt_reference(corpus: Path, work: Path, kind: str, num_proc: int) -> dict:
    """nanoGPT's data/openwebtext/prepare.py with zoo's tokenizer: datasets.map(num_proc) to
    per-document id lists, then one uint16 memmap filled in 1024 batches."""
    code = f"""
import json, time
import numpy as np
from pathlib import Path
from zoo.data import build_datamodule
cfg = {{"source": "local", "path": {str(corpus)!r}, "cache_dir": {str(work / ("tp-" + kind))!r}}}
tok = {{"kind": {kind!r}, "cache_dir": {str(work / ("tp-" + kind))!r}}}
dm = build_datamodule(cfg, tok, "causal_lm", batch_size=1)
splits = dm._raw_splits(); enc = dm._build_tokenizer()
start = time.perf_counter()
def process(example):
    ids = enc.encode(example["text"]) + [enc.eos_id]
    return {{"ids": ids, "len": len(ids)}}
tokens = 0
for split, dset in splits.items():
    tokenized = dset.map(process, remove_columns=["text"], num_proc={num_proc}, load_from_cache_file=False)
    arr_len = np.sum(tokenized["len"], dtype=np.uint64)
    arr = np.memmap(Path({str(work)!r}) / f"nanogpt-{{split}}.bin", dtype=np.uint16, mode="w+", shape=(arr_len,))
    idx = 0
    for batch_idx in range(1024):
        batch = tokenized.shard(num_shards=1024, index=batch_idx, contiguous=True).with_format("numpy")
        arr_batch = np.concatenate(batch["ids"])
        arr[idx : idx + len(arr_batch)] = arr_batch
        idx += len(arr_batch)
    arr.flush()
    tokens += int(arr_len)
print(json.dumps({{"tokens": tokens, "seconds": time.perf_counter() - start}}))
"""
    return _timed_python(code)


def _timed_python(code: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_DATASETS_DISABLE_PROGRESS_BARS="1")
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    memory = PeakMemory(proc.pid)
    out, err = proc.communicate()
    peaks = memory.stop()
    if proc.returncode != 0:
        raise SystemExit(err[-3000:])
    result = json.loads(out.strip().splitlines()[-1])
    result["tokens_per_s"] = round(result["tokens"] / result["seconds"])
    result["peak_rss_mib"] = round(max(peaks.values()) / 1024)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,100,1000", help="corpus sizes in MB")
    parser.add_argument("--work", default=None, help="where corpora and caches go (default: a temp dir)")
    parser.add_argument("--out", default="benchmarks/results/data_scale.json")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement; medians are reported")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="zoo-data-"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, Any] = {"device": f"{os.cpu_count()}-core CPU", "sizes_mb": sizes, "runs": {}, "throughput": {}}
    import shutil

    for mb in sizes:
        corpus = make_corpus(work / f"corpus-{mb}mb.txt", mb)
        cache = work / f"cache-{mb}"
        colds = []
        for _ in range(args.repeats):
            shutil.rmtree(cache, ignore_errors=True)
            colds.append(train(corpus, cache, work / f"run-{mb}-cold"))
        row = {
            "cold": median_of(colds),
            "warm": median_of([train(corpus, cache, work / f"run-{mb}-warm") for _ in range(args.repeats)]),
        }
        if mb == max(sizes):
            row["warm_ddp_cpu_2_ranks"] = median_of(
                [train(corpus, cache, work / f"run-{mb}-ddp", "trainer=ddp_cpu") for _ in range(args.repeats)]
            )
        results["runs"][f"{mb}MB"] = row
        print(mb, "MB", json.dumps(row), flush=True)
    if not args.skip_throughput:
        corpus = make_corpus(work / "corpus-100mb.txt", 100)
        for kind in ("byte", "sentencepiece_bpe"):
            for n in (1, 2):
                results["throughput"][f"zoo {kind} num_proc={n}"] = throughput(corpus, work, kind, n)
                results["throughput"][f"nanoGPT-style {kind} num_proc={n}"] = nanogpt_reference(corpus, work, kind, n)
                print(kind, n, json.dumps({k: v for k, v in results["throughput"].items() if kind in k}), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
