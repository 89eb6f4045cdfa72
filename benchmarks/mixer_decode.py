"""Decoding by context, per mixer: full attention against Gated DeltaNet and Mamba 2 hybrids
(not a test: run it, read the table).

    python benchmarks/mixer_decode.py --contexts 256,1024,2048 --rounds 3 \\
        --out benchmarks/results/mixer_decode_cpu.json

Seven arms of one 8-layer decoder (`model=gdn_hybrid model.attention=full
model.global_every=null`, d_model 128, 4 heads, random weights), differing only in
`model.layer_pattern`: every layer full attention; Gated DeltaNet to full attention 1:1, 3:1 and
7:1 and all Gated DeltaNet; Mamba 2 3:1 and all Mamba 2. At each context every arm decodes
greedily, batch 1, with its growing cache (`zoo.bench.decode`, what `zoo-bench measure=decode`
measures for one model): every (arm, context) runs once per round, interleaved in this one
process, medians over rounds. Columns: tokens/s of the steps after the prompt, the prefill,
the cache's bytes counted in the cache object (and checked against zoo.models.limits'
torch-free count), each against full attention at the same context.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys

import torch

import zoo
from zoo.bench.decode import decode_by_context
from zoo.bench.options import parse_contexts
from zoo.bench.report import decode_arms_table
from zoo.bench.run import _device_name
from zoo.config.errors import ConfigError
from zoo.config.schema.convert import as_model_config
from zoo.models.summary import summarize

GDN, MAMBA, FULL = "gated_deltanet", "mamba2", "full"
ARMS = {  # name -> model.layer_pattern (None: model.attention=full in every layer)
    "full": None,
    "gdn 1:1": [GDN, FULL],
    "gdn 3:1": [GDN] * 3 + [FULL],
    "gdn 7:1": [GDN] * 7 + [FULL],
    "gdn all": [GDN],
    "mamba2 3:1": [MAMBA] * 3 + [FULL],
    "mamba2 all": [MAMBA],
}


def overrides(pattern: list[str] | None, d_model: int, max_seq_len: int) -> list[str]:
    base = [
        "model=gdn_hybrid",
        "model.attention=full",
        "model.global_every=null",
        "model.n_layers=8",
        f"model.d_model={d_model}",
        "model.n_heads=4",
        f"model.max_seq_len={max_seq_len}",
        "model.dropout=0.0",
    ]
    return base if pattern is None else [*base, f"model.layer_pattern=[{','.join(pattern)}]"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", default="256,1024,2048", help="comma-separated prompt lengths")
    parser.add_argument("--new-tokens", type=int, default=64, help="greedy new tokens after each prompt")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    parser.add_argument("--note", default="", help="what the JSON should say of the machine's state")
    args = parser.parse_args()
    try:
        contexts = parse_contexts(args.contexts)
        if args.new_tokens < 2 or args.rounds < 1:
            raise ConfigError(f"--new-tokens must be >= 2 and --rounds >= 1, got {args.new_tokens}, {args.rounds}")
    except ConfigError as exc:
        sys.exit(f"mixer_decode: error: {exc}")
    torch.set_num_threads(args.threads)
    max_seq_len = max(contexts) + args.new_tokens
    models, arms = {}, {}
    for name, pattern in ARMS.items():
        argv = overrides(pattern, args.d_model, max_seq_len)
        cfg = as_model_config(zoo.compose(argv).model)
        torch.manual_seed(0)
        models[name] = zoo.build_model(cfg).eval()
        summary = summarize(models[name], max(contexts))
        arms[name] = {
            "overrides": argv,
            "parameters": sum(p.numel() for p in models[name].parameters()),
            "non_embedding_parameters": summary.as_dict().get("non_embedding_params"),
        }
    figures = decode_by_context(models, contexts=contexts, new_tokens=args.new_tokens, rounds=args.rounds, log=print)
    for name, by_context in figures.items():
        arms[name]["decode"] = by_context
        for d in by_context:
            if d["cache_bytes"] != d["cache_bytes_counted"]:
                sys.exit(
                    f"{name} at {d['context']}: the cache holds {d['cache_bytes']} bytes, limits counts "
                    f"{d['cache_bytes_counted']}"
                )
    result = {
        "machine": {
            "device": _device_name(torch.device("cpu")),
            "note": args.note,
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "python": platform.python_version(),
        },
        "contexts": contexts,
        "new_tokens": args.new_tokens,
        "rounds": args.rounds,
        "arms": arms,
    }
    print(decode_arms_table(result))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
