"""Training throughput of each block option against the baseline block (not a test: run it, read
the table).

    python benchmarks/block_options.py --rounds 5 --out block_options.json

The default `gpt` preset (pre-LN, random weights), batch 8 × 256 tokens, a training step
(forward, chunked loss, backward, AdamW) per case per round, the arms built from one seed.
Rounds are interleaved (every arm once, repeat) and the medians reported, so the noise of a
shared machine hits every arm alike. Each arm changes one key of the baseline; the z-loss arm
changes `task.z_loss` (the training loss) only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

import zoo
from zoo.config.schema.convert import as_model_config
from zoo.config.schema.task import OutputLoss

ARMS = {
    "baseline": [],
    "model.norm=sandwich": ["model.norm=sandwich"],
    "model.norm=reordered": ["model.norm=reordered"],
    "model.block=parallel": ["model.block=parallel"],
    "model.block=parallel_two_norms": ["model.block=parallel_two_norms"],
    "model.qk_norm=head": ["model.qk_norm=head"],
    "model.qk_norm=projection": ["model.qk_norm=projection"],
    "model.attn_softcap=50": ["model.attn_softcap=50"],
    "model.final_softcap=30": ["model.final_softcap=30"],
    "task.z_loss=1e-4": [],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    cases = {}
    for name, overrides in ARMS.items():
        torch.manual_seed(0)
        model = zoo.build_model(as_model_config(zoo.compose(overrides).model)).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        z = 1e-4 if name.startswith("task.z_loss") else 0.0
        cases[name] = (model, optimizer, z)
    ids = torch.randint(6, cases["baseline"][0].config.vocab_size, (args.batch, args.seq_len + 1))
    inputs, targets = {"input_ids": ids[:, :-1]}, ids[:, 1:]

    def step(model, optimizer, z) -> None:
        loss = model.forward_losses(inputs, targets, output_loss=OutputLoss.chunked, z_loss=z).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for case in cases.values():
        step(*case)  # warm-up
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, case in cases.items():
            start = time.perf_counter()
            step(*case)
            times[name].append(time.perf_counter() - start)
    tokens = args.batch * args.seq_len
    base = statistics.median(times["baseline"])
    rows = [{"arm": name, "tokens_per_s": tokens / statistics.median(t), "relative": base / statistics.median(t)}
            for name, t in times.items()]
    print(f"| arm | training tokens/s | vs baseline |  (batch {args.batch} x {args.seq_len}, "
          f"{args.threads} threads, median of {args.rounds})")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r['arm']} | {r['tokens_per_s']:,.0f} | {r['relative']:.2f} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "batch": args.batch, "seq_len": args.seq_len, "threads": args.threads,
                       "rounds": args.rounds}, f, indent=2)


if __name__ == "__main__":
    main()
