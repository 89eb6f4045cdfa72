"""The cost of lm-evaluation-harness tasks through zoo's model adapter against the harness's
own Hugging Face backend on the same model exported to transformers (not a test: run it, read
the table).

    python benchmarks/harness_cost.py --rounds 2 --limit 100 --out benchmarks/results/harness_cost.json

The model: zoo's `gpt` composition (decoder-only, d_model 256, 4 layers, 4 heads, learned
positions, pre-LN, GELU; random weights, float32) over a byte-level BPE tokenizer of 320 pieces
trained here on the pydoc corpus, exported with `zoo.interop.hf.to_hf` (what zoo-export
writes). Engines, each at batch 16 on the CPU: `zoo` (the adapter: a multiple choice's shared
context runs once from its KV cache), `zoo-whole` (the adapter with every request run whole,
as the Hugging Face backend runs them) and `hf` (the harness's model "hf", pretrained= the
exported directory). Tasks: the built-in kjv_next_verse (4 choices; 0-shot, and 3-shot, where
the adapter runs each question's long context once for its choices), kjv_cloze and
numbers_translation (greedy, until a newline, at most 32 tokens; the random model rarely emits
one, so every example decodes 32 tokens), `--limit` examples of each. Every engine runs every
task once per round, in the same order (the noise of a shared machine hits each alike); the
table gives examples/s (examples over the seconds spent inside the engine's loglikelihood or
generate_until: tokenizing, batching, the forwards and decoding; the harness's own work around
them is the same for every engine and left out), the median over rounds, and the spread
(max/min) of the rounds.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.interop.tiny_hf import save_tokenizer  # noqa: E402
from zoo.data.tokenizers.hf import HFTokenizer  # noqa: E402
from zoo.harness.adapter import ZooLM  # noqa: E402
from zoo.harness.run import evaluate_tasks, task_manager  # noqa: E402
from zoo.interop.hf import to_hf  # noqa: E402
from zoo.models.build import build_model  # noqa: E402

# (task, shots): the multiple choice 0-shot (its context about a choice's length: each request
# runs whole) and 3-shot (a long context its choices share: run once from its KV cache)
TASKS = [("kjv_next_verse", 0), ("kjv_next_verse", 3), ("kjv_cloze", 0), ("numbers_translation", 0)]


def _timed(lm) -> list[float]:
    """Wraps the three calls the harness makes on `lm`; the returned cell accumulates the
    seconds spent in them (the harness's own work - building the task's requests, its metrics -
    is the same for every engine and left out)."""
    cell = [0.0]
    for name in ("loglikelihood", "loglikelihood_rolling", "generate_until"):
        method = getattr(lm, name)

        def timed(requests, *args, _method=method, **kwargs):
            start = time.perf_counter()
            try:
                return _method(requests, *args, **kwargs)
            finally:
                cell[0] += time.perf_counter() - start

        setattr(lm, name, timed)
    return cell


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    from lm_eval.models.huggingface import HFLM

    directory = Path(tempfile.mkdtemp(prefix="harness-cost-"))
    save_tokenizer(directory)
    tokenizer = HFTokenizer(directory)
    torch.manual_seed(0)
    model = build_model(
        dict(
            family="decoder_only",
            position={"kind": "learned"},
            d_model=256,
            n_layers=4,
            n_heads=4,
            vocab_size=tokenizer.vocab_size,
            max_seq_len=512,
            dropout=0.0,
        )
    ).eval()
    hf = to_hf(model)
    for name in ("bos", "eos", "pad"):
        setattr(hf.config, f"{name}_token_id", tokenizer.special_ids()[name])
    hf.save_pretrained(directory)
    engines = {
        "zoo": ZooLM(model, tokenizer, batch_size=args.batch_size),
        "zoo-whole": ZooLM(model, tokenizer, batch_size=args.batch_size, share_context=False),
        "hf": HFLM(
            pretrained=str(directory), device="cpu", dtype="float32", batch_size=args.batch_size, max_length=512
        ),
    }
    spent = {name: _timed(lm) for name, lm in engines.items()}  # seconds inside the model's calls
    manager = task_manager(sorted({t for t, _ in TASKS}))
    seconds: dict[str, dict[tuple, list[float]]] = {e: {t: [] for t in TASKS} for e in engines}
    scores: dict[str, dict[str, float]] = {}
    for r in range(args.rounds):
        for task, shots in TASKS:
            for name, lm in engines.items():
                spent[name][0] = 0.0
                out = evaluate_tasks(
                    lm, [task], limit=args.limit, num_fewshot=shots, manager=manager, bootstrap_iters=0
                )
                seconds[name][(task, shots)].append(spent[name][0])
                scores.setdefault(name, {}).update({f"{k} ({shots}-shot)": v for k, v in out["metrics"].items()})
                print(f"round {r + 1} {task:20s} {shots}-shot {name:10s} {spent[name][0]:7.2f} s", file=sys.stderr)
    rows = []
    for task, shots in TASKS:
        for name in engines:
            times = sorted(seconds[name][(task, shots)])
            median = times[len(times) // 2] if len(times) % 2 else sum(times[len(times) // 2 - 1 :][:2]) / 2
            rows.append(
                {
                    "task": task,
                    "shots": shots,
                    "engine": name,
                    "examples_per_s": round(args.limit / median, 2),
                    "spread": round(times[-1] / times[0], 3),
                    "seconds": [round(t, 3) for t in times],
                }
            )
    print(f"{'task':22s}{'shots':>6s}  {'engine':12s}{'examples/s':>12s}{'spread':>8s}")
    for row in rows:
        print(
            f"{row['task']:22s}{row['shots']:6d}  {row['engine']:12s}{row['examples_per_s']:12.2f}{row['spread']:8.2f}"
        )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "date": datetime.date.today().isoformat(),
            "machine": platform.processor() or platform.machine(),
            "threads": torch.get_num_threads(),
            "limit": args.limit,
            "rounds": args.rounds,
            "batch_size": args.batch_size,
            "rows": rows,
            "scores": scores,
        }
        args.out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
