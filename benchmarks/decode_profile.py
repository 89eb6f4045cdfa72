"""Where a batch-1 greedy decoding step's time goes on a GPU: GPT-2 small (zoo-bench's gpt2-small
shape), bf16, static cache, the step compiled with CUDA graphs (`compile=true`), as zoo-bench's
`bf16-compile` variant decodes. Prints the tokens/s of a timed call, then the profiler's tables of
one more call: the host's self time by operator (what the Python loop spends between graph
replays) and the device's time by kernel, and the count of graph launches and host-device copies
per new token.

    python benchmarks/decode_profile.py [--new-tokens 128] [--prompt 32] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

import zoo
from zoo.bench.options import SHAPES
from zoo.config.schema.convert import as_model_config
from zoo.models.generate import GenerationConfig, generate


def gpt2_small():
    """zoo-bench's gpt2-small shape, composed as zoo-bench composes it."""
    overrides, _ = SHAPES["gpt2-small"]
    return zoo.build_model(as_model_config(zoo.compose(["model.dropout=0.0", *overrides]).model))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("decode_profile: needs a CUDA GPU")
    torch.manual_seed(0)
    model = gpt2_small().cuda().to(torch.bfloat16).eval()
    ids = torch.randint(0, model.config.vocab_size, (1, a.prompt), device="cuda")
    config = GenerationConfig(max_new_tokens=a.new_tokens, static_cache=True, compile=True)
    with torch.no_grad():
        for _ in range(2):  # compile, capture the graphs, warm up
            generate(model, ids, config=config)
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = generate(model, ids, config=config)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        print(f"tokens/s (batch 1, {out.shape[1]} new tokens): {out.shape[1] / seconds:,.0f}")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            generate(model, ids, config=config)
            torch.cuda.synchronize()
    events = prof.key_averages()
    host = events.table(sort_by="self_cpu_time_total", row_limit=25)
    device = events.table(sort_by="self_cuda_time_total", row_limit=15)
    counts = {e.key: e.count for e in events}
    per_token = {
        k: counts.get(k, 0) / a.new_tokens
        for k in ("cudaGraphLaunch", "cudaMemcpyAsync", "cudaStreamSynchronize", "cudaLaunchKernel", "aten::item")
    }
    print("per new token:", {k: round(v, 2) for k, v in per_token.items()})
    print(host)
    print(device)
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "decode_profile.txt").write_text(
            f"tokens/s {out.shape[1] / seconds:,.1f}\nper new token {per_token}\n\n{host}\n\n{device}\n"
        )
        prof.export_chrome_trace(str(Path(a.out) / "decode_trace.json"))


if __name__ == "__main__":
    main()
