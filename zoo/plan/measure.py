"""The measured peak memory of training steps on the CPU, to hold a plan against: a fresh process
builds zoo's task (`zoo.bench.zoo_subject.zoo_task`: the model, the task's loss) and zoo's
AdamW, and runs three steps of a random batch while a thread samples the resident set size.

    python -m zoo.plan.measure < spec.json      # prints one JSON line

Reported: the peak above the memory held before the model was built (`total_bytes`: weights,
gradients, moments, activations and temporaries) and above the memory held once it was built
(`training_bytes`). glibc's malloc keeps freed blocks below its mmap threshold for reuse and
raises that threshold as large blocks are freed, so the resident set can stay well above the
bytes tensors hold; `peak_training_memory(..., fixed_mmap_threshold=True)` fixes the threshold
(MALLOC_MMAP_THRESHOLD_), so every tensor of 64 KiB or more is given back when freed and the
resident set follows the live tensors, as CUDA's max_memory_allocated does on a GPU."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import torch

from zoo.bench.memory import PeakRSS, _rss_bytes
from zoo.bench.workload import Workload
from zoo.bench.zoo_subject import zoo_task
from zoo.config.schema.model import ModelConfig
from zoo.config.schema.train import OptimConfig
from zoo.data.collate.padding import without_full_masks
from zoo.tasks.optim import build_optimizer

MMAP_THRESHOLD = 65536


def measure(spec: dict) -> dict:
    torch.set_num_threads(spec.get("threads", 2))
    precision = spec["precision"]
    work = Workload(
        model=ModelConfig(**spec["model"]),
        batch=spec["batch"],
        seq_len=spec["seq_len"],
        device=torch.device("cpu"),
        bf16=precision == "bf16-mixed",
    )
    batch = without_full_masks(work.training_batch())
    task_options = {"output_loss": spec.get("output_loss", "chunked"), "loss_chunk": spec.get("loss_chunk", 1024)}
    start = _rss_bytes()
    before = torch.get_default_dtype()
    if precision == "bf16-true":
        torch.set_default_dtype(torch.bfloat16)  # made in bf16, as Lightning's true-precision plugin makes it
    task = zoo_task(work, task_options)
    head = task.model.lm_head.weight if task.model.lm_head is not None else None
    optimizer = build_optimizer(task, OptimConfig(implementation=spec.get("optimizer", "auto")), output_embedding=head)
    built = _rss_bytes()
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16-mixed" else contextlib.nullcontext()
    with PeakRSS() as rss:
        for _ in range(3):
            task.train()
            with autocast:
                loss = task.training_loss(batch)[0]
            loss.backward()
            del loss
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    torch.set_default_dtype(before)
    peak = rss.peak
    return {
        "kind": "peak RSS",
        "total_bytes": max(peak - start, 0),
        "training_bytes": max(peak - built, 0),
        "model_bytes": built - start,
    }


def peak_training_memory(spec: dict, fixed_mmap_threshold: bool = True, timeout: float = 600) -> dict:
    """`measure(spec)` in a fresh Python process."""
    env = dict(os.environ)
    if fixed_mmap_threshold:
        env["MALLOC_MMAP_THRESHOLD_"] = str(MMAP_THRESHOLD)
    else:
        env.pop("MALLOC_MMAP_THRESHOLD_", None)
    done = subprocess.run(
        [sys.executable, "-m", "zoo.plan.measure"],
        input=json.dumps(spec),
        text=True,
        capture_output=True,
        timeout=timeout,
        env=env,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"memory measurement failed: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(sys.stdin.read()))))
