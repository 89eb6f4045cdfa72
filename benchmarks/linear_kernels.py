"""Gated DeltaNet's training cost on a GPU with flash-linear-attention's kernel and with zoo's
PyTorch chunked form, beside full attention of the same shape: one training step (forward, loss,
backward) of an 8-layer decoder, bf16 autocast, eager, at each context length; tokens/s, the
median of `--rounds` interleaved rounds (CUDA events). Arms: `full` (every layer softmax
attention through SDPA), `gdn 3:1 fla` and `gdn 3:1 torch` (three Gated DeltaNet layers to one
full, the gdn_hybrid preset's pattern, with the kernel and inside `torch_only()`), and `gdn all
fla` / `gdn all torch`. Also the agreement of the two paths' losses on the first batch.

    python benchmarks/linear_kernels.py --contexts 2048 8192 --rounds 5 --out linear_kernels.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics

import torch
import torch.nn.functional as F

import zoo
from zoo.nn.linear_kernels import fla_available, torch_only

PATTERNS = {
    "full": ["full"],
    "gdn 3:1": ["gated_deltanet", "gated_deltanet", "gated_deltanet", "full"],
    "gdn all": ["gated_deltanet"],
}


def _config(pattern: list[str], T: int, d_model: int) -> dict:
    return dict(
        family="decoder_only", position={"kind": "rope"}, norm_type="rmsnorm", activation="swiglu",
        d_model=d_model, n_heads=d_model // 128, n_layers=8, vocab_size=32000, max_seq_len=T,
        bias=False, tie_embeddings=False, qk_norm="head", attn_gate="elementwise", layer_pattern=pattern,
    ) | ({"linear_value_heads": 2 * (d_model // 128)} if "gated_deltanet" in pattern else {})  # fmt: skip


def _step(model, ids):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids[:, :-1]).logits  # (B, T, V)
    loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
    loss.backward()
    return loss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--contexts", type=int, nargs="+", default=[2048, 8192])
    p.add_argument("--tokens", type=int, default=16384, help="tokens a step (batch = tokens / context)")
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("linear_kernels: needs a CUDA GPU (the kernel runs on CUDA only)")
    if not fla_available():
        raise SystemExit("linear_kernels: flash-linear-attention is not installed (pip install '.[fla]')")
    rows: list[dict] = []
    for T in a.contexts:
        B = max(1, a.tokens // T)
        ids = torch.randint(0, 32000, (B, T + 1), device="cuda")
        arms = {}
        for name, pattern in PATTERNS.items():
            torch.manual_seed(0)
            model = zoo.build_model(_config(pattern, T, a.d_model)).cuda()
            paths = ["fla", "torch"] if name != "full" else [""]
            for path in paths:
                arms[f"{name} {path}".strip()] = (model, path)
        losses = {}
        times: dict[str, list[float]] = {k: [] for k in arms}
        for round_ in range(a.rounds + 1):  # round 0 warms up (Triton compiles, cuBLAS plans)
            for key, (model, path) in arms.items():
                guard = torch_only() if path == "torch" else contextlib.nullcontext()
                model.zero_grad(set_to_none=True)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                with guard:
                    start.record()
                    loss = _step(model, ids)
                    end.record()
                torch.cuda.synchronize()
                if round_ == 0:
                    losses[key] = loss.item()
                else:
                    times[key].append(start.elapsed_time(end) / 1000)
        base = statistics.median(times["full"])
        for key in arms:
            med = statistics.median(times[key])
            rows.append(
                {"context": T, "batch": B, "arm": key, "tokens_per_s": B * T / med, "step_ms": 1000 * med,
                 "vs_full": base / med, "loss_first_step": losses[key]}
            )  # fmt: skip
        del arms
        torch.cuda.empty_cache()
    record = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "d_model": a.d_model,
              "n_layers": 8, "tokens_per_step": a.tokens, "rounds": a.rounds, "rows": rows}  # fmt: skip
    if a.out:
        with open(a.out, "w") as f:
            json.dump(record, f, indent=1)
    print(f"{'context':>8} {'arm':<14} {'tokens/s':>10} {'step ms':>8} {'vs full':>8} {'loss':>8}")
    for r in rows:
        print(f"{r['context']:>8} {r['arm']:<14} {r['tokens_per_s']:>10,.0f} {r['step_ms']:>8.1f} "
              f"{r['vs_full']:>8.2f} {r['loss_first_step']:>8.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
