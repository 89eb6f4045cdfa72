"""`zoo-eval ckpt=RUN harness=TASK,TASK`: lm-evaluation-harness tasks on a checkpoint, through
the zoo model adapter (`zoo.harness`).

The checkpoint loads as zoo-eval loads it (`load_checkpoint`: integrity checked, its tokenizer
checked against its digest, nothing executed); the task names are checked before it loads. The
results go to a new file in the run directory, `harness/harness-DATE-TIME.json` (a second run
in the same second gets `-1`, `-2`, ...: an earlier file is never overwritten), and a table of
them is printed."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

HARNESS_DIR = "harness"


def run_harness(args, ckpt: Path, tool: str) -> dict:
    """The metrics of `args.harness` on the checkpoint `ckpt`, written and returned."""
    from zoo.config.errors import ConfigError
    from zoo.config.schema.harness import check_limit, check_num_fewshot
    from zoo.harness.run import parse_tasks, require_lm_eval

    require_lm_eval()
    names = parse_tasks(args.harness)
    check_limit("limit", args.limit)
    check_num_fewshot("num_fewshot", args.num_fewshot)
    folder = results_dir(ckpt)

    import lm_eval
    import torch

    from zoo.config.facts.positions import max_positions
    from zoo.harness.adapter import ZooLM
    from zoo.harness.run import check_room, evaluate_tasks, load_tasks, table
    from zoo.training.checkpoint.files import load_checkpoint

    if args.accelerator not in ("auto", "cpu", "gpu", "cuda"):
        raise ConfigError(f"accelerator={args.accelerator!r}: harness= runs on cpu, gpu or auto")
    wants_gpu = args.accelerator in ("gpu", "cuda") or (args.accelerator == "auto" and torch.cuda.is_available())
    if wants_gpu and not torch.cuda.is_available():
        raise ConfigError("accelerator=gpu, but torch sees no CUDA device; use accelerator=cpu")
    # an unknown name, an unreachable dataset or too many few-shot examples: refused before the checkpoint loads
    tasks = load_tasks(names, num_fewshot=args.num_fewshot)
    task = load_checkpoint(ckpt)
    if task.tokenizer is None:
        raise ConfigError(f"{args.ckpt} carries no tokenizer; the harness scores text with the run's own")
    check_room(tasks, max_positions(task.model_config), whose="the checkpoint's")
    model = task.model.to("cuda" if wants_gpu else "cpu").eval()
    lm = ZooLM(model, task.tokenizer, batch_size=args.batch_size)
    started = time.perf_counter()
    out = evaluate_tasks(lm, tasks, limit=args.limit)
    seconds = time.perf_counter() - started
    record = {
        "checkpoint": str(args.ckpt),
        "tasks": names,
        "limit": args.limit,
        "num_fewshot": args.num_fewshot,
        "lm_eval": lm_eval.__version__ if hasattr(lm_eval, "__version__") else None,
        "device": str(lm.device),
        "seconds": round(seconds, 3),
        "metrics": out["metrics"],
        "n_samples": out["n_samples"],
        "versions": out["versions"],
        "results": out["results"],
    }
    from zoo.config.records.atomic import write_text

    text = json.dumps(record, indent=2, default=str) + "\n"
    target = new_file(folder)
    write_text(target, text)
    if args.out:
        write_text(args.out, text)
    print(f"{tool}: harness results written to {target}", file=sys.stderr)
    return {
        "checkpoint": str(args.ckpt),
        "metrics": out["metrics"],
        "results_file": str(target),
        "table": table(out["metrics"]),
        "is_global_zero": True,
    }


def results_dir(ckpt: Path) -> Path:
    """The run directory's harness/ (the checkpoint's directory when it is not in a run), checked
    before anything runs: no link out of the run, a place a file can be written."""
    from zoo.cli.outputs import writable_place
    from zoo.config.records.links import check_name, inside
    from zoo.config.records.rundir import RunDir

    run_dir = ckpt.parent.parent if ckpt.parent.name == RunDir.CHECKPOINTS else (ckpt if ckpt.is_dir() else ckpt.parent)
    folder = inside(run_dir / HARNESS_DIR, run_dir)
    check_name(folder)
    writable_place("ckpt", str(ckpt), folder / "harness.json")
    return folder


def new_file(folder: Path, now: float | None = None, prefix: str = "harness") -> Path:
    """A file of `folder` that did not exist, claimed by creating it: PREFIX-DATE-TIME.json, or
    with -1, -2, ... after it when a run in the same second took that name."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    n = 0
    while True:
        candidate = folder / (f"{prefix}-{stamp}.json" if n == 0 else f"{prefix}-{stamp}-{n}.json")
        try:
            with open(candidate, "x"):
                return candidate
        except FileExistsError:
            n += 1
