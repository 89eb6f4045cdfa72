"""`zoo-plan`: the memory one device holds at the peak of a training step of a zoo model, by part
(weights, gradients, optimizer state, activations, logits and loss, buffers, what FSDP gathers,
DDP's buckets), under a precision and a data-parallel strategy; the largest micro-batch that
fits a device's memory; and, when a plan does not fit, why and which override would make it.

    zoo-plan model=llama model.d_model=4096 model.n_layers=32 model.max_seq_len=4096 seq_len=4096 batch=4
    zoo-plan model=gpt batch=16 strategy=fsdp world_size=8 memory=40GiB
    zoo-plan model=llama strategy=hsdp world_size=16 replicate=2 model.checkpoint_activations=true
    zoo-plan device=cpu precision=32-true memory=16GiB           # a CPU run (chunked loss, float32)

The step is zoo's own, run on fake tensors (no memory is used and nothing is trained): the
model zoo-train builds, the task's output loss, zoo's AdamW; model overrides are those of
zoo-train (model=..., model/position=..., model.*). Prints Markdown; out=FILE.json also writes
the figures as JSON. Exit status: 0 when the plan fits the device, 1 when it does not, 2 for bad
input."""

from __future__ import annotations

import json
import sys
from dataclasses import fields
from pathlib import Path

TOOL = "zoo-plan"
USAGE = f"{TOOL} [KEY=VALUE ...] [model=NAME] [model/position=NAME] [model.KEY=VALUE ...]"


def configure(argv: list[str]):
    """zoo-plan's arguments -> (the zoo ModelConfig, PlanOptions, out path or None)."""
    from zoo.cli.args import parse
    from zoo.cli.outputs import check_out_file
    from zoo.config.errors import ConfigError
    from zoo.plan.options import PlanOptions

    own = {f.name for f in fields(PlanOptions)} | {"out"}
    options = [a for a in argv if a.split("=", 1)[0] in own]
    overrides = [a for a in argv if a not in options]
    not_model = [a for a in overrides if not a.startswith("model")]
    if not_model:
        raise ConfigError(
            f"{not_model[0]!r}: zoo-plan takes model overrides (model=..., model.*=...) and its own "
            f"options: {', '.join(sorted(own))}"
        )
    out = next((a.split("=", 1)[1] for a in options if a.startswith("out=")), None)
    check_out_file("out", out, "plan.json")
    opts, _ = parse(PlanOptions, [a for a in options if not a.startswith("out=")])
    from zoo.cli.compose import compose
    from zoo.config.schema.convert import as_model_config
    from zoo.plan.bounds import planned_seq_len

    cfg = compose(overrides)
    model = as_model_config(cfg.model)
    planned_seq_len(model, opts.seq_len, opts.batch)  # before any step is simulated
    return model, opts, out


def run(argv: list[str]) -> dict:
    from zoo.config.records.atomic import write_text
    from zoo.plan.planner import largest_micro_batch, plan
    from zoo.plan.report import as_json, markdown

    model, opts, out = configure(argv)
    plans: dict = {}
    largest, plans = largest_micro_batch(model, opts, plans)
    chosen = plans.get(opts.batch) or plan(model, opts)
    print(markdown(chosen, largest))
    result = as_json(chosen, largest)
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(result, indent=2))
    return result


def usage() -> str:
    from zoo.cli.tool import Section, help_text
    from zoo.plan.options import PlanOptions

    return help_text(
        USAGE,
        __doc__,
        [Section("options", PlanOptions)],
        notes=[
            "out=FILE.json: also write the plan as JSON",
            "exit status: 0 the plan fits, 1 it does not fit, 2 bad input",
            "model=NAME, model/position=NAME, model.KEY=VALUE: the model overrides of zoo-train "
            "(zoo-train --help lists them); model.checkpoint_activations=true plans activation "
            "checkpointing",
        ],
    )


DOES_NOT_FIT = 1  # the exit status of a plan that does not fit (bad input: 2)


def main(argv: list[str] | None = None) -> None:
    from zoo.cli.tool import serve

    planned: dict = {}
    serve(TOOL, lambda args: planned.update(run(args)), usage, argv)
    if planned and not planned["fits"]:  # a script can tell from the status alone
        sys.exit(DOES_NOT_FIT)


if __name__ == "__main__":
    main()
