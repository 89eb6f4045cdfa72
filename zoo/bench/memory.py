"""Peak training memory of one system, each in a fresh process: peak resident set size on CPU
(the process's high-water mark cannot be reset, so every measurement gets its own process), CUDA
max allocated on GPU. Reported as the peak during two training steps above the memory held
just before them (model weights and the process itself), so activations, gradients, optimizer
state and temporaries are what it counts.

    python -m zoo.bench.memory < spec.json     # prints one JSON line
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading

from zoo.bench.subjects import build_subject, workload_from_spec


def _high_water_mark() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """The peak resident set size while the block runs. The process's high-water mark may
    already be above the block's peak (building the model), so a thread also samples the RSS
    every millisecond: the high-water mark when the block raised it, the sampled peak
    otherwise."""

    def __enter__(self) -> PeakRSS:
        self.mark_before = _high_water_mark()
        self._sampled = _rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.001):
            self._sampled = max(self._sampled, _rss_bytes())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        mark_after = _high_water_mark()
        self.peak = mark_after if mark_after > self.mark_before else self._sampled


def measure(spec: dict) -> dict:
    import torch

    torch.set_num_threads(spec.get("threads") or torch.get_num_threads())
    work = workload_from_spec(spec)
    subject = build_subject(spec["system"], work, compile=spec.get("compile", False))
    batch = work.training_batch()
    if work.device.type == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        for _ in range(2):
            subject.train_step(batch)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        kind = "cuda max allocated"
    else:
        before = _rss_bytes()
        with PeakRSS() as rss:
            for _ in range(2):
                subject.train_step(batch)
        peak = rss.peak
        kind = "peak RSS"
    return {
        "system": subject.name,
        "kind": kind,
        "peak_bytes": peak,
        "before_bytes": before,
        "training_bytes": max(peak - before, 0),
    }


def peak_training_memory(spec: dict, timeout: float = 900) -> dict:
    """`measure(spec)` in a fresh Python process."""
    done = subprocess.run(
        [sys.executable, "-m", "zoo.bench.memory"],
        input=json.dumps(spec),
        text=True,
        capture_output=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"memory measurement of {spec['system']} failed: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(sys.stdin.read()))))
