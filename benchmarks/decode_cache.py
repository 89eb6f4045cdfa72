"""Generation speed with and without the KV cache (not a test: run it, read the table).

    python benchmarks/decode_cache.py --rounds 3 --out decode_cache.json

The default `gpt` preset (5.3 M parameters, random weights; context raised to 1024 so 512 new
tokens fit), batch 1, a 32-token prompt, greedy decoding of 128 and 512 new tokens with no EOS.
Rounds are interleaved (cached-128, uncached-128, cached-512, uncached-512, repeat) and the
medians reported, so the noise of a shared machine hits every case alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

import zoo
from zoo.models.generate import generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = zoo.build_model(zoo.compose(["model.max_seq_len=1024"]).model).eval()
    prompt = torch.randint(6, model.config.vocab_size, (1, 32))
    cases = [(n, cache) for n in (128, 512) for cache in (True, False)]
    times: dict[tuple[int, bool], list[float]] = {c: [] for c in cases}
    generate(model, prompt, max_new_tokens=8)  # warm-up
    for _ in range(args.rounds):
        for n, cache in cases:
            start = time.perf_counter()
            out = generate(model, prompt, max_new_tokens=n, use_cache=cache)
            times[(n, cache)].append(time.perf_counter() - start)
            assert out.shape == (1, n)
    median = {c: statistics.median(t) for c, t in times.items()}
    rows = []
    for cache in (True, False):
        t128, t512 = median[(128, cache)], median[(512, cache)]
        rows.append(
            {
                "cache": cache,
                "tokens_per_s_128": 128 / t128,
                "tokens_per_s_512": 512 / t512,
                "seconds_128": t128,
                "seconds_512": t512,
                "time_ratio_512_over_128": t512 / t128,
            }
        )
    print("| KV cache | 128 new tokens: tokens/s | 512 new tokens: tokens/s | time 512 / time 128 |")
    print("|---|---|---|---|")
    for r in rows:
        print(
            f"| {'on' if r['cache'] else 'off'} | {r['tokens_per_s_128']:,.0f} | {r['tokens_per_s_512']:,.0f} "
            f"| {r['time_ratio_512_over_128']:.2f} |"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rounds": args.rounds, "torch_threads": torch.get_num_threads(), "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
