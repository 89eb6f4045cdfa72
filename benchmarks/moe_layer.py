"""A mixture-of-experts layer (`model.ffn=moe`) against a dense feed-forward unit of the same
active size: time per token of one layer's forward, and of forward + backward, on one device
(not a test: run it, read the table).

    python benchmarks/moe_layer.py --rounds 9 --out benchmarks/results/moe_layer.json
    python benchmarks/moe_layer.py --device cuda --activation swiglu --tokens 16384 --d-model 1024 \
        --d-ff 1024 --rounds 9 --out moe_layer_cuda.json          # a GPU, bfloat16

On a CUDA device the layers run in bfloat16 and the mixture is timed twice, once per dispatch
(`loop`: one pair of matmuls per expert, row counts read on the host; `grouped`: one grouped GEMM
over all experts, nothing read on the host), beside transformers' Mixtral block of the same shape
(`MixtralSparseMoeBlock`, its weights copied from zoo's; with `--activation swiglu` only, its
activation) in its `eager` experts implementation (a loop) and in `grouped_mm` where it has one. Each
arm's output is compared with the loop's first (relative error, printed).

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
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from zoo.bench.run import _device_name  # noqa: E402
from zoo.bench.timing import interleaved, median, spread, timed  # noqa: E402
from zoo.config import ModelConfig  # noqa: E402
from zoo.config.facts.ffn import FFNKind  # noqa: E402
from zoo.nn.feedforward import build_ffn  # noqa: E402
from zoo.nn.moe import MoE  # noqa: E402


def layers(D: int, E: int, k: int, F: int, activation: str) -> dict[str, torch.nn.Module]:
    """The two arms: the mixture (E experts F wide, top-k) and the dense unit k·F wide."""
    base: dict[str, Any] = dict(d_model=D, n_heads=4, n_layers=1, bias=False, activation=activation, dropout=0.0)
    moe = build_ffn(ModelConfig(**base, ffn=FFNKind.moe, d_ff=F, moe_experts=E, moe_top_k=k), FFNKind.moe)
    dense = build_ffn(ModelConfig(**base, d_ff=k * F), FFNKind.dense)
    for unit in (moe, dense):
        for p in unit.parameters():
            torch.nn.init.normal_(p, std=0.02)
    return {f"dense d_ff={k * F}": dense.train(), f"moe E={E} top-{k} F={F}": moe.train()}


class _Dispatch(torch.nn.Module):
    """zoo's mixture with its dispatch pinned (`loop` or `grouped`), sharing its weights."""

    def __init__(self, moe: MoE, dispatch: str) -> None:
        super().__init__()
        self.moe, self.dispatch = moe, dispatch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.moe.dispatch = self.dispatch
        return self.moe(x)


def mixtral(moe: MoE, D: int, E: int, k: int, F: int, implementation: str | None):
    """transformers' Mixtral block of the same shape with zoo's weights (swiglu only), or None
    with the reason. Its gate_up_proj is (E, 2F, D) gate first, down_proj (E, D, F)."""
    try:
        from transformers import MixtralConfig
        from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
    except ImportError as err:
        return None, f"transformers has no Mixtral ({err})"
    cfg = MixtralConfig(hidden_size=D, intermediate_size=F, num_local_experts=E, num_experts_per_tok=k)
    if implementation is not None:
        cfg._experts_implementation = implementation
    block = MixtralSparseMoeBlock(cfg)
    w_in, w_out = moe.experts.w_in, moe.experts.w_out  # (E, 2F, D) gate then up; (E, D, F)
    if tuple(block.experts.gate_up_proj.shape) != tuple(w_in.shape) or tuple(block.experts.down_proj.shape) != tuple(
        w_out.shape
    ):
        return None, "shapes differ from zoo's (run with --activation swiglu)"
    with torch.no_grad():
        block.experts.gate_up_proj.copy_(w_in)
        block.experts.down_proj.copy_(w_out)
        block.gate.weight.copy_(moe.router.weight)
    return block.train(), None


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
    parser.add_argument("--device", default="cpu", help="cpu or cuda (bfloat16, both dispatches, Mixtral)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    arms = layers(args.d_model, args.experts, args.top_k, args.d_ff, args.activation)
    unavailable = {}
    if device.type == "cuda":
        dense_name, moe_name = list(arms)
        moe = arms[moe_name]
        assert isinstance(moe, MoE)  # build_ffn's mixture (`layers`)
        arms = {
            dense_name: arms[dense_name],
            f"{moe_name} loop": _Dispatch(moe, "loop"),
            f"{moe_name} grouped": _Dispatch(moe, "grouped"),
        }
        for implementation in ("eager", "grouped_mm"):
            block, why = mixtral(moe, args.d_model, args.experts, args.top_k, args.d_ff, implementation)
            name = f"hf Mixtral block {implementation}"
            if block is None:
                unavailable[name] = why
                continue
            try:  # an implementation this transformers lacks is refused at the first call
                block.to(device, torch.bfloat16)(torch.randn(1, 8, args.d_model, device=device, dtype=torch.bfloat16))
            except Exception as err:  # noqa: BLE001 - reported, not hidden
                unavailable[name] = f"{type(err).__name__}: {err}"[:200]
                continue
            arms[name] = block
        arms = {name: unit.to(device, torch.bfloat16) for name, unit in arms.items()}
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    x = torch.randn(1, args.tokens, args.d_model, device=device, dtype=dtype)  # (B, T, D)
    grad = torch.randn_like(x)
    if device.type == "cuda":
        with torch.no_grad():
            ref = arms[f"{moe_name} loop"](x).float()
            for name in list(arms)[2:]:
                out = arms[name](x)
                out = (out[0] if isinstance(out, tuple) else out).float()
                print(f"{name}: relative error against the loop {float((out - ref).norm() / ref.norm()):.2e}")

    def forward(unit):
        def run() -> float:
            with torch.no_grad():
                return timed(lambda: unit(x), args.tokens, device)

        return run

    def step(unit):
        def run() -> float:
            def once():
                unit.zero_grad(set_to_none=True)
                out = unit(x)
                (out[0] if isinstance(out, tuple) else out).backward(grad)

            return timed(once, args.tokens, device)

        return run

    cases = {}
    for name, unit in arms.items():
        cases[f"{name} forward"] = forward(unit)
        cases[f"{name} forward+backward"] = step(unit)
    load = os.getloadavg()
    seconds = interleaved(cases, rounds=args.rounds)
    after = os.getloadavg()
    rows: dict[str, Any] = {
        name: {"us_per_token": 1e6 * median(s), "spread": spread(s), "rounds": s} for name, s in seconds.items()
    }
    names = list(arms)[:2]
    for name, why in unavailable.items():
        print(f"{name}: not timed ({why})")
    print(
        f"{_device_name(device)}, {torch.get_num_threads()} threads, {args.tokens} tokens, D={args.d_model}, "
        f"{args.rounds} rounds; load average {load[0]:.2f} before, {after[0]:.2f} after"
    )
    for name, row in rows.items():
        print(f"{name:44s} {row['us_per_token']:8.2f} us/token  spread {100 * row['spread']:.0f}%")
    for what in ("forward", "forward+backward"):
        for name in list(arms)[1:]:
            ratio = rows[f"{name} {what}"]["us_per_token"] / rows[f"{names[0]} {what}"]["us_per_token"]
            label = "moe / dense" if len(arms) == 2 else f"{name} / dense"
            print(f"{label}, {what}: {ratio:.2f} x")
            rows[f"ratio {what}" if len(arms) == 2 else f"ratio {name} {what}"] = ratio
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
            "device": _device_name(device),
            "torch": torch.__version__,
            "unavailable": unavailable,
            "results": rows,
        }
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
