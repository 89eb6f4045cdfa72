"""Training throughput with and without document masking (data.document_mask), on this
machine (not a test: run it, read the table).

    python benchmarks/document_mask.py --rounds 5 --out document_mask.json

The default `gpt` preset (random weights), batch 8 windows of 256 tokens, zoo's training step
(`ZooSubject`: the task's loss, backward, AdamW step). The windows are packed documents whose
lengths are drawn from a geometric distribution of mean `--doc-len` tokens, each ending in eos;
"off" trains on them as today (SDPA's fused causal path), "on" with their document ids (the
block-diagonal mask: SDPA with a boolean (B, 1, T, T) mask, FlexAttention where compiled on a
GPU). Rounds are interleaved and the medians reported, so the noise of a shared machine hits
both cases alike.
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
from zoo.data.collate.causal import collate_causal
from zoo.data.tokenizers.base import SPECIAL_IDS

EOS = SPECIAL_IDS["eos"]


def packed_windows(batch: int, seq_len: int, vocab: int, doc_len: float, seed: int = 0) -> list[torch.Tensor]:
    """`batch` windows of seq_len + 1 ids: documents of geometric lengths (mean `doc_len`), each
    ending in eos, cut where the window ends."""
    g = torch.Generator().manual_seed(seed)
    windows = torch.randint(8, vocab, (batch, seq_len + 1), generator=g)  # (B, T + 1)
    ends = torch.rand(batch, seq_len + 1, generator=g) < 1.0 / doc_len  # (B, T + 1)
    return list(windows.masked_fill(ends, EOS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt", help="a conf/model preset")
    parser.add_argument("--position", default=None, help="a conf/model/position kind (default: the preset's)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--doc-len", type=float, default=64.0, help="mean document length in tokens")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="training steps timed per round and case")
    parser.add_argument("--compile", action="store_true", help="task.compile=true")
    parser.add_argument(
        "--kernel",
        default="sdpa",
        choices=["sdpa", "flex"],
        help="the documents' attention kernel: sdpa (the boolean mask, the default) or flex (FlexAttention's "
        "block mask: with --compile on a GPU)",
    )
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args()

    torch.manual_seed(0)
    overrides = [f"model={args.model}", f"model.max_seq_len={max(args.seq_len, 256)}"]
    if args.position:
        overrides.append(f"model/position={args.position}")
    cfg = as_model_config(zoo.compose(overrides).model)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    work = Workload(model=cfg, batch=args.batch, seq_len=args.seq_len, device=device)
    subject = ZooSubject(work, compile=args.compile)
    subject.model.decoder.document_kernel = args.kernel
    packed = collate_causal(packed_windows(args.batch, args.seq_len, cfg.vocab_size, args.doc_len), eos_id=EOS)
    batches = {
        "off": {k: packed[k].to(device) for k in ("input_ids", "labels")},
        "on": {k: v.to(device) for k, v in packed.items()},
    }
    tokens = args.batch * args.seq_len * args.steps

    def case(batch):
        def run():
            for _ in range(args.steps):
                subject.train_step(batch)

        return lambda: timed(run, tokens, device)

    seconds = interleaved({name: case(b) for name, b in batches.items()}, rounds=args.rounds, warmup=1)
    rates = {name: 1.0 / median(s) for name, s in seconds.items()}
    result = {
        "model": args.model,
        "position": cfg.position.kind.value,
        "params": sum(p.numel() for p in subject.model.parameters()),
        "batch": args.batch,
        "seq_len": args.seq_len,
        "mean_doc_len": args.doc_len,
        "documents_per_window": float(packed["document_ids"][:, -1].float().mean() + 1),
        "compile": args.compile,
        "kernel": args.kernel,
        "device": machine(device),
        "torch": torch.__version__,
        "rounds": args.rounds,
        "tokens_per_s": {name: round(r, 1) for name, r in rates.items()},
        "spread": {name: round(spread(s), 3) for name, s in seconds.items()},
        "on_relative_to_off": round(rates["on"] / rates["off"], 3),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
