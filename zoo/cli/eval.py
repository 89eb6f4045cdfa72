"""`zoo-eval`: a checkpoint's metrics on a dataset, written as JSON.

    zoo-eval ckpt=runs/.../last.ckpt                      # its own validation split
    zoo-eval ckpt=... data=held_out.jsonl out=metrics.json  # a whole file
    zoo-eval ckpt=... data.source=pydoc data.seq_len=64     # any data.* key
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

TOOL = "zoo-eval"


@dataclass(kw_only=True)
class EvalArgs:
    ckpt: Optional[str] = None
    data: Optional[str] = None  # shorthand: evaluate this local file, whole
    seq_len: Optional[int] = None
    split: str = "validation"
    batch_size: int = 32
    limit_batches: Optional[int] = None
    out: Optional[str] = None  # JSON file; printed to stdout as well
    accelerator: str = "cpu"
    devices: int = 1


def run(argv: list[str]) -> dict:
    from omegaconf import OmegaConf

    from zoo.training.checkpoint.files import load_checkpoint
    from zoo.data.errors import DataError
    from zoo.cli.args import parse
    from zoo.config.data import as_data_config
    from zoo.config.errors import ConfigError
    from zoo.training.evaluate import evaluate

    args, data_overrides = parse(EvalArgs, argv, passthrough=("data.",))
    if args.ckpt is None:
        raise ConfigError("ckpt=PATH is required")
    task = load_checkpoint(args.ckpt)
    data = dict(task.extra.get("data") or {})
    if not data and args.data is None and not data_overrides:
        raise ConfigError(f"{args.ckpt} records no dataset; pass data=FILE or data.* keys")
    if args.data is not None:
        if not Path(args.data).is_file():
            raise ConfigError(f"data={args.data}: no such file")
        data.update(source="local", path=args.data, val_path=args.data, hub_name=None, hub_config=None,
                    max_examples=None)
    if data_overrides:
        merged = OmegaConf.merge(OmegaConf.create({"data": data}), OmegaConf.from_dotlist(data_overrides))
        data = OmegaConf.to_container(merged.data, resolve=True)
    if args.seq_len is not None:
        data["seq_len"] = args.seq_len
    as_data_config(data)  # one-line errors for bad keys or values before any data is read
    try:
        result = evaluate(task, data, split=args.split, batch_size=args.batch_size,
                          limit_batches=args.limit_batches, accelerator=args.accelerator, devices=args.devices)
    except DataError as exc:
        import re

        found = re.match(r"the (train|validation) split has (\d+) tokens, fewer than one block of (\d+)", str(exc))
        if args.data is None or not found:
            raise
        raise DataError(f"data={args.data} has {found.group(2)} tokens, fewer than one window of "
                        f"{found.group(3)}; give a smaller seq_len=N or a longer file") from None
    result = {"checkpoint": str(args.ckpt), **result}
    if result["is_global_zero"] and args.out:
        Path(args.out).write_text(json.dumps({k: v for k, v in result.items() if k != "is_global_zero"}, indent=2) + "\n")
    return result


def main() -> None:
    from zoo.training.checkpoint.files import CheckpointError
    from zoo.cli.args import fail
    from zoo.config.errors import ConfigError
    from zoo.data.errors import DataError

    try:
        result = run(sys.argv[1:])
    except (ConfigError, CheckpointError, DataError) as exc:
        fail(TOOL, str(exc))
        return
    if result.pop("is_global_zero"):  # one report, however many ranks evaluated
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
