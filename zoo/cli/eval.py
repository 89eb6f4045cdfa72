"""`zoo-eval`: a checkpoint's metrics on a dataset, written as JSON.

    zoo-eval ckpt=runs/.../last.ckpt                      # its own validation split
    zoo-eval ckpt=... data=held_out.jsonl out=metrics.json  # a whole file
    zoo-eval ckpt=... data.source=pydoc data.seq_len=64     # any data.* key
    zoo-eval ckpt=runs/.../last.ckpt harness=kjv_cloze,kjv_next_verse limit=20  # harness tasks (zoo[eval])
    zoo-eval ckpt=... data.seq_len=64 model.position.scaling=yarn model.position.scale=2  # RoPE past its trained 32
    zoo-eval ckpt=runs/.../last.ckpt weights=ema          # the average a run with optim.ema saved
    zoo-eval ckpt=runs/DATE/TIME average=3                 # the mean of the run's last 3 checkpoints
    zoo-eval ckpt=runs/DATE/TIME probe=recall pairs=4,8,16  # associative recall, on a data=recall run

Every option: `zoo-eval --help`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

TOOL = "zoo-eval"
PASSTHROUGH = ("data.", "model.")  # data.* keys, and model.position.* of RoPE's scaling rule
USAGE = f"{TOOL} ckpt=PATH [KEY=VALUE ...] [data.KEY=VALUE ...] [model.position.KEY=VALUE ...]"


@dataclass(kw_only=True)
class EvalArgs:
    ckpt: str | None = field(default=None, metadata={"help": "the checkpoint to evaluate (required)"})
    data: str | None = field(
        default=None,
        metadata={
            "help": "a local data file (.txt, .jsonl/.json, .csv/.tsv, .parquet), "
            "evaluated whole, instead of the checkpoint's own dataset"
        },
    )
    seq_len: int | None = field(
        default=None, metadata={"help": "tokens per window (default: the checkpoint's data.seq_len)"}
    )
    split: str = field(default="validation", metadata={"help": "the split to evaluate: train or validation"})
    batch_size: int = field(default=32, metadata={"help": "rows per batch"})
    limit_batches: int | None = field(
        default=None, metadata={"help": "evaluate at most this many batches (default: all)"}
    )
    out: str | None = field(
        default=None, metadata={"help": "also write the metrics to this JSON file (they are printed either way)"}
    )
    accelerator: str = field(
        default="auto",
        metadata={
            "help": "Lightning accelerator: cpu, gpu, or auto (a GPU where torch sees one, as zoo-generate picks)"
        },
    )
    devices: int = field(default=1, metadata={"help": "devices (processes) to evaluate on"})
    harness: str | None = field(
        default=None,
        metadata={
            "help": "lm-evaluation-harness tasks, comma-separated (built in: kjv_cloze, "
            "kjv_next_verse, numbers_translation; any harness task whose dataset can be "
            "reached): a table, and the results in the run's harness/ directory"
        },
    )
    limit: float | None = field(
        default=None, metadata={"help": "harness=: examples per task (below 1: a fraction of each; default: all)"}
    )
    num_fewshot: int | None = field(
        default=None, metadata={"help": "harness=: examples shown before each question (default: each task's own)"}
    )
    weights: str = field(
        default="raw",
        metadata={"help": "raw (the optimizer's weights) or ema (the average a run with optim.ema saved beside them)"},
    )
    average: int | None = field(
        default=None,
        metadata={
            "help": "evaluate the mean of the last K checkpoints (by step) of the run directory ckpt= "
            "(last.ckpt and best-STEP.ckpt; callbacks.save_top_k=-1 keeps one at every validation)"
        },
    )
    # the associative-recall probe (zoo.cli.recall)
    probe: str | None = field(
        default=None,
        metadata={
            "help": "recall: the multi-query associative recall probe on a run trained on data=recall "
            "(accuracy by pairs and key-query distance), results in the run's harness/ directory"
        },
    )
    pairs: str | None = field(
        default=None, metadata={"help": "probe=: key-value pairs per sequence, e.g. 4,8,16 (default: the run's)"}
    )
    examples: int | None = field(default=None, metadata={"help": "probe=: sequences per pair count (default 500)"})
    seed: int | None = field(
        default=None, metadata={"help": "probe=: seed of the probe's sequences (default 1; a run draws with 0)"}
    )


def run(argv: list[str]) -> dict:
    """The metrics (also printed by `report`). The arguments, the data file and the checkpoint's
    path are checked before torch loads."""
    from zoo.cli.args import not_a_file, parse
    from zoo.cli.outputs import check_out_file
    from zoo.config.errors import ConfigError
    from zoo.config.records.rundir import locate_checkpoint
    from zoo.config.schema.rope_rule import check_rope_rule_keys

    args, passed = parse(EvalArgs, argv, passthrough=PASSTHROUGH)
    data_overrides = [o for o in passed if o.startswith("data.")]
    rope_rule = [o for o in passed if o.startswith("model.")]  # RoPE's scaling rule, nothing else
    check_rope_rule_keys(rope_rule, TOOL)
    if args.ckpt is None:
        raise ConfigError("ckpt=PATH is required")
    if args.split not in ("validation", "train"):
        raise ConfigError(f"split={args.split!r} is not allowed; choose one of: validation, train")
    for key in ("batch_size", "devices", "limit_batches"):
        value = getattr(args, key)
        if value is not None and value < 1:
            raise ConfigError(f"{key} must be >= 1, got {value}")
    if args.data is not None and not Path(args.data).is_file():
        raise ConfigError(f"data={args.data}: {not_a_file(Path(args.data))}")
    from zoo.config.facts.ema import Weights

    Weights.parse(args.weights, "weights")
    if args.average is not None and (isinstance(args.average, bool) or args.average < 1):
        raise ConfigError(f"average must be a whole number of checkpoints >= 1, got {args.average!r}")
    ckpt = locate_checkpoint(args.ckpt)
    check_out_file("out", args.out, "metrics.json", reads=[("ckpt", ckpt), ("data", args.data)])
    if args.out is not None and not Path(args.out).resolve().parent.is_dir():
        raise ConfigError(f"out={args.out}: the directory {Path(args.out).parent} does not exist")
    if args.harness is None and (args.limit is not None or args.num_fewshot is not None):
        raise ConfigError("limit= and num_fewshot= apply to harness=TASKS; give harness= or drop them")
    if args.probe is None and (args.pairs is not None or args.examples is not None or args.seed is not None):
        raise ConfigError("pairs=, examples= and seed= apply to probe=recall; give probe=recall or drop them")
    if args.probe is not None:
        if args.harness is not None:
            raise ConfigError("probe= and harness= are separate evaluations; give one of them")
        if args.data is not None or data_overrides or args.limit_batches is not None or args.split != "validation":
            raise ConfigError("probe= draws its own sequences; drop data=, data.*, split= and limit_batches=")
        if args.devices != 1:
            raise ConfigError(f"probe= runs on one device; drop devices={args.devices}")
        from zoo.cli.recall import run_recall

        return run_recall(args, ckpt, rope_rule, TOOL)
    if args.harness is not None:
        if args.data is not None or data_overrides or args.seq_len is not None or args.limit_batches is not None:
            raise ConfigError(
                "harness= evaluates tasks, not a dataset; drop data=, data.*, seq_len= and limit_batches="
            )
        if args.devices != 1:
            raise ConfigError(f"harness= runs on one device; drop devices={args.devices}")
        if rope_rule:
            raise ConfigError(f"{rope_rule[0]}: harness= runs the checkpoint as trained; drop model.position.*")
        if args.weights != "raw" or args.average is not None:
            raise ConfigError("harness= scores a checkpoint's raw weights; drop weights= and average=")
        from zoo.cli.harness import run_harness

        return run_harness(args, ckpt, TOOL)

    from omegaconf import OmegaConf

    from zoo.config.schema.data import as_data_config
    from zoo.data.errors import DataError
    from zoo.training.checkpoint.averaging import load_weights
    from zoo.training.evaluate import evaluate

    task, sources = load_weights(
        args.ckpt if args.average is not None else ckpt, args.weights, args.average, rope_rule=rope_rule, tool=TOOL
    )
    data = dict(task.extras.data or {})
    if not data and args.data is None and not data_overrides:
        raise ConfigError(f"{args.ckpt} records no dataset; pass data=FILE or data.* keys")
    if args.data is not None:
        data.update(
            source="local", path=args.data, val_path=args.data, hub_name=None, hub_config=None, max_examples=None
        )
    if data_overrides:
        data = _for_another_source(data, data_overrides)
        merged = OmegaConf.merge(OmegaConf.create({"data": data}), OmegaConf.from_dotlist(data_overrides))
        data = cast(dict, OmegaConf.to_container(merged.data, resolve=True))  # a mapping made from one
    if args.seq_len is not None:
        data["seq_len"] = args.seq_len
    checked = as_data_config(data)  # one-line errors for bad keys or values before any data is read
    given = (
        "seq_len"
        if args.seq_len is not None
        else "data.seq_len"
        if any(o.startswith("data.seq_len=") for o in data_overrides)
        else None
    )
    _check_window(task.model_config, getattr(checked, "seq_len", None), given=given)
    try:
        result = evaluate(
            task,
            data,
            split=args.split,
            batch_size=args.batch_size,
            limit_batches=args.limit_batches,
            accelerator=args.accelerator,
            devices=args.devices,
        )
    except DataError as exc:
        import re

        found = re.match(r"the (train|validation) split has (\d+) tokens, fewer than one block of (\d+)", str(exc))
        if args.data is None or not found:
            raise
        raise DataError(
            f"data={args.data} has {found.group(2)} tokens, fewer than one window of "
            f"{found.group(3)}; give a smaller seq_len=N or a longer file"
        ) from None
    result = {"checkpoint": str(args.ckpt), "weights": args.weights, **result}
    if args.average is not None:
        result = {**result, "averaged": [str(p) for p in sources]}
    plain = args.weights == "raw" and args.average is None  # the weights the run's summary measured
    if plain and result["is_global_zero"] and args.data is None and not data_overrides and args.split == "validation":
        note = _beside_the_summary(ckpt, result)
        if note:
            print(f"{TOOL}: {note}", file=sys.stderr)
    if result["is_global_zero"] and args.out:
        from zoo.config.records.atomic import write_text

        write_text(args.out, json.dumps({k: v for k, v in result.items() if k != "is_global_zero"}, indent=2) + "\n")
    return result


SOURCE_KEYS = ("path", "val_path", "hub_name", "hub_config", "streaming")


def _for_another_source(data: dict, overrides: list[str]) -> dict:
    """`data.source=X` other than the checkpoint's: the keys that name where the checkpoint's
    data came from (its files, its Hub dataset, streaming them) start from their defaults
    unless given too, so a run trained on `data=local` evaluates on `data.source=pydoc` (its
    `data.path` would otherwise be refused as one that only applies to local files)."""
    from dataclasses import fields

    from zoo.config.schema.data import DataConfig

    given = {item.split("=", 1)[0].lstrip("+~").removeprefix("data."): item for item in overrides}
    source = given.get("source", "").partition("=")[2]
    if not source or source == str(data.get("source")):
        return data
    defaults = {f.name: f.default for f in fields(DataConfig) if f.name in SOURCE_KEYS}
    return {**data, **{key: value for key, value in defaults.items() if key not in given}}


def _check_window(model, seq_len, *, given: str | None) -> None:
    """A window longer than a bounded position scheme's positions (a learned table ends at
    model.max_seq_len) is refused before any data is read; `given`: the key the command set it
    with (None: the checkpoint's own)."""
    from zoo.config.errors import ConfigError
    from zoo.config.facts.positions import max_positions

    bound = max_positions(model)
    if bound is None or not isinstance(seq_len, int) or seq_len <= bound:
        return
    where = f"{given}={seq_len}" if given else f"the checkpoint's data.seq_len={seq_len}"
    raise ConfigError(
        f"{where} is past the model's {model.position.kind.value} positions (model.max_seq_len="
        f"{bound}): give seq_len={bound} or less"
    )


def _beside_the_summary(ckpt: Path, result: dict) -> str | None:
    """One line that puts this val/loss beside the one the run's summary.json reports, with the
    validation tokens each was measured on (a run validates on trainer.limit_val_batches
    batches; zoo-eval on the whole split unless limit_batches= says otherwise). None where the
    checkpoint is not in a finished run directory or either count is unknown."""
    from zoo.config.errors import ZooError
    from zoo.config.records.rundir import RunDir, RunSummary

    run_dir = ckpt.parent.parent if ckpt.parent.name == RunDir.CHECKPOINTS else ckpt
    try:
        summary = RunSummary.read(run_dir)
    except (ZooError, OSError):
        return None
    theirs = (summary.data or {}).get("val_tokens_measured")
    loss = summary.metrics.get("val/loss")
    ours = result.get("tokens_evaluated")
    if theirs is None or ours is None or loss is None or "loss" not in result["metrics"]:
        return None
    same = "the same count" if theirs == ours else "different tokens, so the figures differ"
    return (
        f"val/loss {result['metrics']['loss']:.4f} over {ours:,} validation tokens; the run's summary.json "
        f"reports {loss:.4f} over {theirs:,} (a run validates on trainer.limit_val_batches batches): {same}"
    )


def usage() -> str:
    from zoo.cli.tool import Section, help_text

    return help_text(
        USAGE,
        __doc__,
        [Section("options", EvalArgs)],
        notes=[
            "data.KEY=VALUE: any key of zoo-train's data section (zoo-train --help lists "
            "them), applied to the checkpoint's recorded dataset"
        ],
    )


def main(argv: list[str] | None = None) -> None:
    from zoo.cli.tool import serve

    serve(TOOL, report, usage, argv)


def report(argv: list[str]) -> None:
    result = run(argv)
    if "table" in result:  # harness=: its table (the JSON is in the run directory)
        print(result["table"])
    elif result.pop("is_global_zero"):  # one report, however many ranks evaluated
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
