"""`zoo-prepare`: tokenize a language-model corpus into prepared token shards ahead of training,
with the same overrides `zoo-train` takes; `zoo-train` with those overrides then maps the shards
instead of preparing them (useful before a multi-node job, or for a corpus whose preparation
would outlast the ranks' start-up timeout).

    zoo-prepare data=local data.path='corpus/*.txt' tokenizer=byte data.num_proc=16
    zoo-prepare -cn RECIPE              # a recipe's data
    zoo-prepare ... part=3/8            # array task 3 of 8: every 8th shard from the 3rd (0-based);
                                        # the task that completes the set writes the entry
    sbatch --array=0-7 --wrap 'zoo-prepare ... part=$SLURM_ARRAY_TASK_ID/8'
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

TOOL = "zoo-prepare"
USAGE = f"{TOOL} [-cn RECIPE] [part=I/N] [OVERRIDE ...]"


@dataclass(kw_only=True)
class PrepareArgs:
    """zoo-prepare's own keys; every other argument is an override of zoo-train's."""

    part: str | None = field(
        default=None,
        metadata={
            "help": "I/N: prepare every N-th shard from the "
            "I-th (0-based), e.g. one SLURM array task each; "
            "the part that completes the set writes the entry"
        },
    )


def run(argv: list[str]) -> dict:
    from zoo.cli.compose import compose
    from zoo.config.errors import ConfigError
    from zoo.config.facts.tasks import kinds_that, task_spec
    from zoo.config.paths import CONFIG_NAME
    from zoo.config.schema.task import TaskConfig

    name, overrides, part = None, [], None
    args = iter(argv)
    for arg in args:
        if arg in ("-cn", "--config-name"):
            name = next(args, None)
            if name is None:
                raise ConfigError(f"{arg} needs a recipe name")
        elif arg.startswith("part="):
            part = _part(arg[len("part=") :])
        else:
            overrides.append(arg)
    cfg = compose(overrides, name or CONFIG_NAME, check=False)
    kind = TaskConfig(**dict(cfg.task)).kind.value
    if not task_spec(kind).packs:
        raise ConfigError(
            f"task {kind}: zoo-prepare makes token shards for {' and '.join(kinds_that('packs'))} "
            f"data; other tasks tokenize at the start of training"
        )
    from zoo.data import build_datamodule  # torch and Lightning: after the refusals above

    start = time.perf_counter()
    dm = build_datamodule(cfg.data, cfg.tokenizer, kind, batch_size=1)
    if dm.data_cfg.streaming:
        raise ConfigError("data.streaming=true reads the corpus as it trains; there is nothing to prepare")
    dm.part = part
    dm.prepare_data()
    prepared = dm.prepared
    if prepared is None:  # this part is done; others are not
        assert part is not None  # without part= the one run writes the whole entry
        return {
            "part": f"{part[0]}/{part[1]}",
            "done": True,
            "entry": "written by the part that finishes last",
            "seconds": round(time.perf_counter() - start, 1),
        }
    splits = prepared.index["splits"]
    return {
        "prepared": str(prepared.directory),
        "built": prepared.built,
        "dtype": prepared.index["dtype"],
        "tokens": {s: splits[s]["tokens"] for s in splits},
        "documents": {s: splits[s]["documents"] for s in splits},
        "seconds": round(time.perf_counter() - start, 1),
    }


def _part(text: str) -> tuple[int, int]:
    from zoo.config.errors import ConfigError

    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ConfigError(f"part={text}: give I/N, e.g. part=0/8") from None
    if not 0 <= i < n:
        raise ConfigError(f"part={text}: I must be in 0 .. N-1")
    return i, n


def usage() -> str:
    from zoo.cli.tool import Section, help_text

    return help_text(
        USAGE,
        __doc__,
        [Section("options", PrepareArgs)],
        notes=[
            "-cn RECIPE: prepare a recipe's data",
            "OVERRIDE: any override of zoo-train (data=..., data.KEY=VALUE, tokenizer=..., "
            "task=...; zoo-train --help lists them)",
        ],
    )


def main(argv: list[str] | None = None) -> None:
    from zoo.cli.tool import serve

    serve(TOOL, lambda args: print(json.dumps(run(args), indent=1)), usage, argv)


if __name__ == "__main__":
    main()
