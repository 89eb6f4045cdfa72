"""A mixture-of-experts layer (`model.ffn=moe`) against a dense feed-forward unit of the same
active size: time per token of one layer's forward, and of forward + backward, on one device
(not a test: run it, read the table).

    python benchmarks/moe_layer.py --rounds 9 --out benchmarks/results/moe_layer.json

The mixture has E experts of hidden width F, top-k routing (softmax, renormalised, dropless);
the dense unit is k·F wide, so a token passes through as many expert weights in both (the
mixture adds its router, 2·D·E FLOPs a token, and the dispatch: the sort, the gather of each
slot's token, the weighting and the sum back). Both are built by zoo's own builders from one
model config (`zoo.nn.feedforward.build_ffn`). Timed by zoo-bench's interleaved rounds (each arm
once per round, the same order, so the noise of a shared machine hits both alike), reported as
medians over rounds with their spread ((max - min) / median) and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from zoo.bench.run import _device_name  # noqa: E402
from zoo.bench.timing import interleaved, median, spread, timed  # noqa: E402
from zoo.config import ModelConfig  # noqa: E402
from zoo.config.facts.ffn import FFNKind  # noqa: E402
from zoo.nn.feedforward import build_ffn  # noqa: E402


def layers(D: int, E: int, k: int, F: int, activation: str) -> dict[str, torch.nn.Module]:
    """The two arms: the mixture (E experts F wide, top-k) and the dense unit k·F wide."""
    base = dict(d_model=D, n_heads=4, n_layers=1, bias=False, activation=activation, dropout=0.0)
    moe = build_ffn(ModelConfig(**base, ffn="moe", d_ff=F, moe_experts=E, moe_top_k=k), FFNKind.moe)
    dense = build_ffn(ModelConfig(**base, d_ff=k * F), FFNKind.dense)
    for unit in (moe, dense):
        for p in unit.parameters():
            torch.nn.init.normal_(p, std=0.02)
    return {f"dense d_ff={k * F}": dense.train(), f"moe E={E} top-{k} F={F}": moe.train()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--d-ff", type=int, default=512, help="each expert's hidden width")
    parser.add_argument("--activation", default="gelu")
    parser.add_argument("--tokens", type=int, default=8 * 256, help="tokens a forward takes (batch x length)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1: one core's time, the least disturbed on a shared machine)",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    arms = layers(args.d_model, args.experts, args.top_k, args.d_ff, args.activation)
    x = torch.randn(1, args.tokens, args.d_model)  # (B, T, D)
    grad = torch.randn_like(x)

    def forward(unit):
        def run() -> float:
            with torch.no_grad():
                return timed(lambda: unit(x), args.tokens, device)

        return run

    def step(unit):
        def run() -> float:
            def once():
                unit.zero_grad(set_to_none=True)
                unit(x).backward(grad)

            return timed(once, args.tokens, device)

        return run

    cases = {}
    for name, unit in arms.items():
        cases[f"{name} forward"] = forward(unit)
        cases[f"{name} forward+backward"] = step(unit)
    load = os.getloadavg()
    seconds = interleaved(cases, rounds=args.rounds)
    after = os.getloadavg()
    rows = {name: {"us_per_token": 1e6 * median(s), "spread": spread(s), "rounds": s} for name, s in seconds.items()}
    names = list(arms)
    print(
        f"{_device_name(device)}, {torch.get_num_threads()} threads, {args.tokens} tokens, D={args.d_model}, "
        f"{args.rounds} rounds; load average {load[0]:.2f} before, {after[0]:.2f} after"
    )
    for name, row in rows.items():
        print(f"{name:44s} {row['us_per_token']:8.2f} us/token  spread {100 * row['spread']:.0f}%")
    for what in ("forward", "forward+backward"):
        ratio = rows[f"{names[1]} {what}"]["us_per_token"] / rows[f"{names[0]} {what}"]["us_per_token"]
        print(f"moe / dense, {what}: {ratio:.2f} x")
        rows[f"ratio {what}"] = ratio
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "processor": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "threads": torch.get_num_threads(),
            "load_average_before": load,
            "load_average_after": after,
            "args": {k: str(v) for k, v in vars(args).items()},
            "results": rows,
        }
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
