"""`zoo-eval ckpt=RUN probe=recall`: the associative-recall probe (MQAR, `zoo.harness.recall`)
on a causal LM trained on `data=recall`, at the run's symbols and sequence length.

The checkpoint loads as zoo-eval loads it (its own weights, `weights=ema` or `average=K`); a
checkpoint of another task or another dataset is refused on one line. The result goes to a new
pair of files in the run directory, `harness/recall-DATE-TIME.json` and `.csv` (a second run in
the same second gets `-1`, `-2`, ...), and to `out=` when given; a table is printed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

PROBES = ("recall",)
EXAMPLES = 500  # sequences per pair count: +-~1% on an accuracy near 0.5 with 8 pairs
SEED = 1  # the probe's sequences; a run draws its own with data.recall_seed (0 by default)


def check_probe_args(args) -> None:
    """The probe's arguments, before anything loads."""
    from zoo.config.errors import ConfigError

    if args.probe not in PROBES:
        raise ConfigError(f"probe={args.probe!r} is not a probe; choose one of: {', '.join(PROBES)}")
    if args.examples is not None and (isinstance(args.examples, bool) or args.examples < 1):
        raise ConfigError(f"examples must be a number of sequences >= 1, got {args.examples!r}")
    if args.seed is not None and (isinstance(args.seed, bool) or args.seed < 0):
        raise ConfigError(f"seed must be an integer >= 0, got {args.seed!r}")
    if args.accelerator not in ("auto", "cpu", "gpu", "cuda"):
        raise ConfigError(f"accelerator={args.accelerator!r}: probe= runs on cpu, gpu or auto")


def run_recall(args, ckpt: Path, rope_rule: list[str], tool: str) -> dict:
    """The probe's result on checkpoint `ckpt`, written, returned with its table."""
    import torch

    from zoo.cli.harness import new_file, results_dir
    from zoo.config.errors import ConfigError
    from zoo.config.facts.tasks import TaskKind
    from zoo.config.records.atomic import write_text
    from zoo.config.schema.recall import recall_spec
    from zoo.harness.recall import check_pairs, csv_text, score, symbol_ids, table
    from zoo.training.checkpoint.averaging import load_weights

    check_probe_args(args)
    folder = results_dir(ckpt)
    task, sources = load_weights(
        args.ckpt if args.average is not None else ckpt, args.weights, args.average, rope_rule=rope_rule, tool=tool
    )
    if task.kind != TaskKind.causal_lm:
        raise ConfigError(
            f"probe=recall scores a causal language model; {args.ckpt} is task={task.kind.value} "
            f"(model.family={task.model_config.family.value})"
        )
    data = dict(task.extras.data or {})
    if data.get("source") != "recall":
        raise ConfigError(
            f"probe=recall scores a run trained on data=recall (its symbols and sequence length); "
            f"{args.ckpt} trained on data.source={data.get('source')}"
        )
    if args.seq_len is not None:
        data["seq_len"] = args.seq_len
    spec = recall_spec(data)
    pairs = check_pairs(args.pairs, spec.num_kv_pairs, spec)
    _check_length(task.model_config, spec.seq_len, given=args.seq_len is not None)
    if task.tokenizer is None:
        raise ConfigError(f"{args.ckpt} carries no tokenizer; probe=recall reads its symbols' ids from it")
    ids = symbol_ids(task.tokenizer, spec)
    if int(ids.max()) >= task.model_config.vocab_size:
        raise ConfigError(
            f"the tokenizer's ids reach {int(ids.max())}, past model.vocab_size={task.model_config.vocab_size}"
        )
    device = (
        "cuda"
        if args.accelerator in ("gpu", "cuda") or (args.accelerator == "auto" and torch.cuda.is_available())
        else "cpu"
    )
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("accelerator=gpu, but torch sees no CUDA device; use accelerator=cpu")
    model = task.model.to(device).eval()
    result = score(
        model,
        ids,
        spec,
        pairs,
        examples=args.examples or EXAMPLES,
        seed=SEED if args.seed is None else args.seed,
        batch_size=args.batch_size,
        device=device,
    )
    result = {"checkpoint": str(args.ckpt), "weights": args.weights, **result}
    if args.average is not None:
        result["averaged"] = [str(p) for p in sources]
    text = json.dumps(result, indent=2) + "\n"
    target = new_file(folder, prefix="recall")
    write_text(target, text)
    write_text(target.with_suffix(".csv"), csv_text(result))
    if args.out:
        write_text(args.out, text)
    print(f"{tool}: recall results written to {target} (and {target.with_suffix('.csv').name})", file=sys.stderr)
    return {**result, "results_file": str(target), "table": table(result), "is_global_zero": True}


def _check_length(model, seq_len: int, *, given: bool) -> None:
    """Sequences no longer than a bounded position scheme's positions."""
    from zoo.config.errors import ConfigError
    from zoo.config.facts.positions import max_positions

    bound = max_positions(model)
    if bound is not None and seq_len > bound:
        where = "seq_len" if given else "the run's data.seq_len"
        raise ConfigError(
            f"{where} gives sequences of {seq_len} symbols, past the model's positions "
            f"(model.max_seq_len={bound}): give seq_len={bound + 1} or less"
        )
