"""`zoo-bench`: training throughput, forward latency, generation speed, peak memory and model
FLOPs utilisation of a zoo model, against the same model in Hugging Face transformers and
x-transformers (optional: `pip install '.[bench]' in zoo's source directory`), in one process, interleaved rounds,
medians.

    zoo-bench                                   # the default model (gpt), the reference shape
    zoo-bench shape=gpt2-small variants=eager,bf16,bf16-compile peers=hf,x-transformers,litgpt
    zoo-bench model=llama peers=hf out=bench.json
    zoo-bench model=bert variants=eager measure=train,forward,memory
    zoo-bench variants=eager,checkpoint measure=memory memory_seq_len=1024 model.max_seq_len=1024
    zoo-bench model=gdn_hybrid variants=eager peers=none measure=decode contexts=256,1024,2048 new_tokens=32
    zoo-bench ckpt=runs/.../last.ckpt           # greedy decoding, plain and self-speculative (task.mtp_depth)

Model overrides are those of zoo-train (model=..., model/position=..., model.*); dropout is 0
unless model.dropout is given. Prints a Markdown table; out=FILE.json also writes the JSON and
FILE.md."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

TOOL = "zoo-bench"
USAGE = f"{TOOL} [KEY=VALUE ...] [model=NAME] [model/position=NAME] [model.KEY=VALUE ...]"


@dataclass(kw_only=True)
class BenchOutput:
    """Where the figures go, beside the Markdown table printed on stdout."""

    out: str | None = field(
        default=None,
        metadata={"help": "FILE.json: also write the figures as JSON, and the table (with the command) as FILE.md"},
    )


def configure(argv: list[str]):
    """zoo-bench's arguments -> (the zoo ModelConfig, BenchOptions, out path or None)."""
    from zoo.bench.options import SHAPES, BenchOptions
    from zoo.cli.args import parse
    from zoo.cli.outputs import check_out_file
    from zoo.config.errors import ConfigError
    from zoo.config.schema.convert import as_model_config

    own = {f.name for f in fields(BenchOptions)} | {f.name for f in fields(BenchOutput)}
    options = [a for a in argv if a.split("=", 1)[0] in own]
    overrides = [a for a in argv if a not in options]
    not_model = [a for a in overrides if not a.startswith("model")]
    if not_model:
        keys = ", ".join(sorted(own))
        raise ConfigError(
            f"{not_model[0]!r}: zoo-bench takes model overrides (model=..., model.*=...) and its own options: {keys}"
        )
    out = next((a.split("=", 1)[1] for a in options if a.startswith("out=")), None)
    check_out_file("out", out, "bench.json")  # before minutes of timing
    if out is not None:  # the table is written beside the JSON
        check_out_file("out", str(Path(out).with_suffix(".md")), "bench.json")
    given = [a for a in options if not a.startswith("out=")]
    opts, _ = parse(BenchOptions, given)
    shape_overrides, shape_sizes = SHAPES[opts.shape]
    if shape_sizes:  # the shape's batch and seq_len, unless given
        named = {a.split("=", 1)[0] for a in given}
        sizes = [f"{key}={value}" for key, value in shape_sizes.items() if key not in named]
        opts, _ = parse(BenchOptions, [*sizes, *given])
    from zoo.cli.compose import compose

    cfg = compose(["model.dropout=0.0", *shape_overrides, *overrides])
    model = as_model_config(cfg.model)
    from zoo.training.machine import check_model_memory

    check_model_memory(model)  # before a model that cannot fit is built, in zoo and in each peer
    return model, opts, out


def run(argv: list[str], log=print) -> dict:
    from zoo.bench.report import markdown
    from zoo.bench.run import run_bench

    if asks_speculative(argv):
        return _run_speculative(argv, log)
    model, opts, out = configure(argv)
    _say_missing_peers(opts.peer_list, log)
    result = run_bench(model, opts, log=lambda m: log(f"{TOOL}: {m}", file=sys.stderr))
    table = markdown(result)
    print(table)
    _write(out, argv, result, table)
    return result


def _write(out: str | None, argv: list[str], result: dict, table: str) -> None:
    """out=FILE.json: the figures, and the table with the command as FILE.md."""
    from zoo.config.records.atomic import write_text

    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(result, indent=2))
        command = " ".join(a for a in argv if not a.startswith("out="))  # no local paths in the record
        write_text(path.with_suffix(".md"), f"`zoo-bench {command}`\n\n{table}")


def asks_speculative(argv: list[str]) -> bool:
    """zoo-bench ckpt=PATH: the speculative decoding measure of a trained checkpoint."""
    return any(a.split("=", 1)[0] == "ckpt" for a in argv)


def configure_speculative(argv: list[str]):
    """zoo-bench ckpt=PATH [prompts=FILE] [new_tokens=N] [rounds=N] [threads=N] [out=FILE.json]
    -> (SpeculativeOptions, out path or None), every argument checked before torch loads (the
    checkpoint's path by `_run_speculative`)."""
    from zoo.bench.options import SpeculativeOptions
    from zoo.cli.args import parse
    from zoo.cli.outputs import check_out_file
    from zoo.config.errors import ConfigError

    own = {f.name for f in fields(SpeculativeOptions)}
    other = [a for a in argv if a.split("=", 1)[0] not in own | {"out"}]
    if other:
        raise ConfigError(f"{other[0]!r}: zoo-bench ckpt=PATH takes {', '.join(sorted(own | {'out'}))}")
    out = next((a.split("=", 1)[1] for a in argv if a.startswith("out=")), None)
    check_out_file("out", out, "bench.json")
    if out is not None:
        check_out_file("out", str(Path(out).with_suffix(".md")), "bench.json")
    opts, _ = parse(SpeculativeOptions, [a for a in argv if not a.startswith("out=")])
    if not opts.ckpt:
        raise ConfigError("ckpt=PATH names the checkpoint to decode with (a run trained with task.mtp_depth)")
    return opts, out


def _run_speculative(argv: list[str], log=print) -> dict:
    """Greedy decoding of a checkpoint trained with task.mtp_depth, plain and speculative
    (`zoo.bench.speculative`)."""
    from zoo.config.records.rundir import locate_checkpoint

    opts, out = configure_speculative(argv)
    ckpt = locate_checkpoint(opts.ckpt or "")
    from zoo.bench.speculative import markdown, read_prompts, run_speculative

    read_prompts(opts)  # a bad prompts file, before the checkpoint loads
    result = run_speculative(opts, ckpt, log=lambda m: log(f"{TOOL}: {m}", file=sys.stderr))
    table = markdown(result)
    print(table)
    _write(out, argv, result, table)
    return result


def _say_missing_peers(peers: list[str], log=print) -> None:
    """One line, before any work, naming the peers asked for that are not installed and what the
    benchmark measures without them (the table says it again at the end)."""
    from zoo.bench.options import missing_peers

    missing = missing_peers(peers)
    if not missing:
        return
    present = [p for p in peers if p not in missing]
    without = f"zoo and {', '.join(present)} only" if present else "zoo alone"
    log(
        f"{TOOL}: {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed (pip install "
        f"'.[bench]' in zoo's source directory): measuring {without}",
        file=sys.stderr,
    )


def usage() -> str:
    from zoo.bench.options import BenchOptions, SpeculativeOptions
    from zoo.cli.tool import Section, help_text

    return help_text(
        USAGE,
        __doc__,
        [
            Section("options", BenchOptions),
            Section("output", BenchOutput),
            Section("speculative decoding of a trained checkpoint (ckpt=PATH)", SpeculativeOptions),
        ],
        notes=[
            "model=NAME, model/position=NAME, model.KEY=VALUE: the model overrides of "
            "zoo-train (zoo-train --help lists them)"
        ],
    )


def main(argv: list[str] | None = None) -> None:
    from zoo.cli.tool import serve

    serve(TOOL, run, usage, argv)


if __name__ == "__main__":
    main()
