"""Whole-model training throughput of sliding-window layers by attention kernel, on this machine
(not a test: run it, read the table).

    python benchmarks/sliding_train.py --seq-len 16384 --window 1024 --compile --out sliding_train.json

A conf/model preset (default `llama`, random weights) at `--seq-len`, zoo's training step
(`ZooSubject`: the task's loss, backward, AdamW step), in four arms: "full" (every layer full
causal attention, SDPA's fused path), "sliding_sdpa" (every layer a window of `--window`:
SDPA with the boolean band), "sliding_flex" (the same layers with the stack's
`sliding_kernel = "flex"`: FlexAttention with the band's block mask) and "sliding_auto" (the
stack's own rule). Rounds are interleaved and medians reported, so the noise of a shared machine
hits every arm alike. The flex arm needs FlexAttention's backward, a GPU kernel: on a CPU it is
left out, said in the output. Issue: a sliding-window model at 16k tokens should train faster
than the same model with full attention.
"""

from __future__ import annotations

import argparse
import json

import torch

import zoo
from zoo.bench.timing import interleaved, machine, median, spread, timed
from zoo.bench.workload import Workload
from zoo.bench.zoo_subject import ZooSubject
from zoo.config.schema.convert import as_model_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama", help="a conf/model preset")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2, help="training steps timed per round and arm")
    parser.add_argument("--compile", action="store_true", help="task.compile=true")
    parser.add_argument("--overrides", nargs="*", default=[], help="more model overrides (model.n_layers=4 ...)")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    base = [f"model={args.model}", f"model.max_seq_len={args.seq_len}", *args.overrides]
    sliding = [*base, "model/attention=sliding", f"model.window={args.window}", "model.global_every=null"]
    arms = {"full": (base, None), "sliding_sdpa": (sliding, "sdpa"), "sliding_auto": (sliding, None)}
    left_out = {}
    if device.type == "cuda":
        arms["sliding_flex"] = (sliding, "flex")
    else:
        left_out["sliding_flex"] = "FlexAttention has no backward on the CPU (torch 2.13)"

    g = torch.Generator().manual_seed(0)
    subjects, batches = {}, {}
    for name, (overrides, kernel) in arms.items():
        torch.manual_seed(0)
        cfg = as_model_config(zoo.compose(overrides).model)
        subject = ZooSubject(
            Workload(model=cfg, batch=args.batch, seq_len=args.seq_len, device=device), compile=args.compile
        )
        subject.model.decoder.sliding_kernel = kernel
        ids = torch.randint(8, cfg.vocab_size, (args.batch, args.seq_len + 1), generator=g)  # (B, T + 1)
        batches[name] = {"input_ids": ids[:, :-1].to(device), "labels": ids[:, 1:].to(device)}
        subjects[name] = subject
    tokens = args.batch * args.seq_len * args.steps

    def case(name):
        def run():
            for _ in range(args.steps):
                subjects[name].train_step(batches[name])

        return lambda: timed(run, tokens, device)

    seconds = interleaved({name: case(name) for name in arms}, rounds=args.rounds, warmup=1)
    rates = {name: 1.0 / median(s) for name, s in seconds.items()}
    result = {
        "model": args.model,
        "overrides": args.overrides,
        "params": sum(p.numel() for p in subjects["full"].model.parameters()),
        "batch": args.batch,
        "seq_len": args.seq_len,
        "window": args.window,
        "compile": args.compile,
        "device": machine(device),
        "torch": torch.__version__,
        "rounds": args.rounds,
        "tokens_per_s": {name: round(r, 1) for name, r in rates.items()},
        "spread": {name: round(spread(s), 3) for name, s in seconds.items()},
        "relative_to_full": {name: round(r / rates["full"], 3) for name, r in rates.items()},
        "left_out": left_out,
    }
    print(json.dumps(result, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
