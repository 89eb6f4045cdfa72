"""Kernel launches per training step and per decoding step, counted on the CPU (not a test: run
it, read the table).

    python benchmarks/launches.py --out benchmarks/results/launches.json

On a GPU each ATen operation that computes something is at least one kernel launch, and a
step whose launches take longer to issue than the GPU takes to run them is bound by the host.
Counting them needs no GPU: every operation that reaches the kernels (views and other
metadata-only operations excluded) is counted with a TorchDispatchMode, and every read of a
tensor's value on the host (`.item()`, `bool(t)`: a sync on a GPU) with it.

Training: the GPT-2-small layout (12 layers, learned positions, GELU, tied embeddings) at
batch 16 × 1024 tokens, narrowed to width 64 and vocabulary 512 (the counts do not depend on
widths), one forward + loss + backward + AdamW step, for zoo's output losses as a GPU runs
them (the accelerator paths of `zoo.nn.host`) and for the peers. Decoding: one greedy step of
zoo's growing and static caches after a 32-token prompt, eager (compiled, the static step is
one graph: one CUDA-graph launch per step on a GPU, `tests/nn/test_cache.py`).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import zoo
from zoo.bench.subjects import build_subject
from zoo.bench.workload import Workload
from zoo.bench.zoo_subject import ZooSubject
from zoo.config.schema.convert import as_model_config

SHAPE = [
    "model=gpt",
    "model.d_model=64",
    "model.n_heads=2",
    "model.n_layers=12",
    "model.vocab_size=512",
    "model.max_seq_len=1024",
    "model.dropout=0.0",
]
READS = {"aten._local_scalar_dense.default", "aten.is_nonzero.default", "aten.item.default"}
SYNCING = {"aten.nonzero.default"}  # computes, and its output size needs a host read


class Launches(TorchDispatchMode):
    """Counts the operations that compute (not views), and host reads of tensor values."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.reads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        if name in READS or name in SYNCING:
            self.reads += 1
        if name in READS:
            pass
        elif not func.is_view and not name.startswith(("aten._unsafe_view", "aten.detach", "aten.alias")):
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


def count(fn) -> dict:
    fn()  # warm-up (lazy state, optimizer buffers)
    with Launches() as seen:
        fn()
    return {"launches": sum(seen.ops.values()), "host_reads": seen.reads, "top": dict(seen.ops.most_common(6))}


def as_on_gpu(fn):
    """Run fn with zoo's accelerator paths (no host reads, no value-dependent shortcuts), as on
    a GPU, while the tensors stay on the CPU."""
    try:
        import zoo.nn.host as host
    except ImportError:  # a zoo before these paths existed: it read values on every device
        return fn

    def run():
        free = host.host_reads_are_free
        paths = [m for m in _modules_using_host()]
        for m in paths:
            m.host_reads_are_free = lambda t: False
        try:
            return fn()
        finally:
            for m in paths:
                m.host_reads_are_free = free

    return run


def _modules_using_host():
    import sys

    return [
        m
        for m in list(sys.modules.values())
        if getattr(m, "host_reads_are_free", None) is not None
        and m.__name__.startswith("zoo.")
        and m.__name__ != "zoo.nn.host"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="write the counts as JSON here")
    parser.add_argument("--peers", default="hf,x-transformers,litgpt")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = as_model_config(zoo.compose(SHAPE).model)
    work = Workload(model=model, batch=16, seq_len=1024, device=torch.device("cpu"))
    batch = work.training_batch()
    rows = {}
    for output_loss in ("logits", "chunked"):
        torch.manual_seed(0)
        subject = ZooSubject(work)
        subject.task.task_config.output_loss = type(subject.task.task_config.output_loss)(output_loss)
        subject.optimizer = torch.optim.AdamW(subject.model.parameters(), fused=True)  # as on CUDA
        rows[f"zoo {output_loss}"] = count(as_on_gpu(lambda s=subject: s.train_step(batch)))
        print(f"zoo {output_loss}: {rows[f'zoo {output_loss}']}", flush=True)
    zoo_subject = ZooSubject(work)
    for peer in [p for p in args.peers.split(",") if p]:
        try:
            other = build_subject(peer, work, zoo=zoo_subject)
        except Exception as exc:  # noqa: BLE001 (an absent peer is reported, not fatal)
            print(f"{peer}: unavailable ({exc})")
            continue
        other.optimizer = torch.optim.AdamW(other.model.parameters(), fused=True)
        rows[other.name] = count(lambda s=other: s.train_step(batch))
        print(f"{other.name}: {rows[other.name]}", flush=True)

    decode = {}
    from zoo.models.generate import GenerationConfig, generate

    gen_model = zoo_subject.model.eval()
    prompt = work.prompt(1, 32)
    for name, config in (
        ("eager, growing cache", GenerationConfig()),
        ("eager, static cache", GenerationConfig(static_cache=True)),
    ):

        def two(config=config):
            return generate(gen_model, prompt, max_new_tokens=2, config=config)

        def three(config=config):
            return generate(gen_model, prompt, max_new_tokens=3, config=config)

        a, b = count(as_on_gpu(two)), count(as_on_gpu(three))
        decode[name] = {"launches": b["launches"] - a["launches"], "host_reads": b["host_reads"] - a["host_reads"]}
        print(f"decode step, {name}: {decode[name]}", flush=True)
    result = {
        "training_step": rows,
        "decoding_step": decode,
        "shape": "GPT-2-small layout (12 layers), width 64, vocab 512, batch 16 x 1024; decoding batch 1",
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
