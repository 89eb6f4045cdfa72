"""Run harness tasks on a `ZooLM` and read the results back as zoo metrics.

A task is a built-in one (`zoo.harness.tasks`, made offline) or any task or group the harness
knows (its own YAMLs: HellaSwag, ARC, PIQA, LAMBADA, ..., whose datasets come from the Hugging
Face Hub where a network is there). The harness's result keys, "acc,none" with its
"acc_stderr,none", become `harness/TASK/acc` and `harness/TASK/acc_stderr`; a filter other than
"none" is named before the metric (`harness/TASK/FILTER/exact_match`), so that a metric's last
part is always its kind (zoo-compare reads which way is better from it)."""

from __future__ import annotations

import difflib
import importlib.util
import logging
import math
from typing import Any

from zoo.config.errors import ConfigError
from zoo.harness.tasks import BUILT_IN, materialize

PREFIX = "harness"
PIN = "lm_eval==0.4.13"  # the extra zoo[eval]
BOOTSTRAP_ITERS = 1000  # draws for a bootstrapped standard error (the harness's default is 100,000)
NO_POOL = "DISABLE_MULTIPROC"  # the harness's switch: bootstrap in this process


def require_lm_eval() -> None:
    """One line, before anything loads, when the extra is not installed."""
    if importlib.util.find_spec("lm_eval") is None:
        raise ConfigError(f"harness= needs lm-evaluation-harness: pip install '.[eval]' in zoo's source directory (or pip install {PIN})")


def parse_tasks(text: Any) -> list[str]:
    """ "a,b" or ["a", "b"] -> ["a", "b"]: names of tasks, each once, none empty."""
    parts = text if isinstance(text, (list, tuple)) else str(text).split(",")
    names = [str(p).strip() for p in parts]
    if not names or any(not n for n in names):
        raise ConfigError(f"give task names separated by commas, e.g. kjv_cloze,kjv_next_verse; got {text!r}")
    return list(dict.fromkeys(names))


def task_manager(names: list[str], cache_dir: str | None = None):
    """The harness's TaskManager with zoo's built-in tasks among `names` on its include path
    (and the harness's own tasks where a name is not built in); a name neither knows is refused
    on one line, with the nearest known name."""
    from lm_eval.tasks import TaskManager

    ours = [n for n in names if n in BUILT_IN]
    include = str(materialize(ours, cache_dir)) if ours else None
    # the harness's own thousands of task files are indexed only when a name is not built in
    manager = TaskManager(include_path=include, include_defaults=len(ours) < len(names))
    known = set(manager.all_tasks)
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known | set(BUILT_IN)), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ConfigError(
                f"harness task {name!r} is not known; {hint}built in: {', '.join(BUILT_IN)} "
                f"(and every task of lm-evaluation-harness)"
            )
    return manager


def evaluate_tasks(
    lm,
    names: list[str],
    *,
    limit: float | None = None,
    num_fewshot: int | None = None,
    seed: int = 0,
    cache_dir: str | None = None,
    log_samples: bool = False,
    manager=None,
    bootstrap_iters: int = BOOTSTRAP_ITERS,
) -> dict:
    """The harness's `simple_evaluate` on `lm` (a `ZooLM` or any harness model): {"metrics":
    {harness/TASK/METRIC: value}, "results": the harness's own results, "samples": its
    per-sample records when `log_samples`}. Standard errors: closed-form for means, bootstrapped
    (`bootstrap_iters` draws, in this process: the harness's pool of one process per core would
    fork a training run) for perplexity; 0 leaves them out."""
    import contextlib
    import os
    import sys

    from lm_eval import evaluator

    manager = manager or task_manager(names, cache_dir)
    quiet = logging.getLogger("lm_eval")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the harness logs every step at INFO/WARNING
    single = os.environ.get(NO_POOL)
    os.environ[NO_POOL] = "1"
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the harness prints its progress: stdout is the table's
            out = evaluator.simple_evaluate(
                model=lm,
                tasks=names,
                task_manager=manager,
                limit=limit,
                num_fewshot=num_fewshot,
                log_samples=log_samples,
                random_seed=seed,
                numpy_random_seed=seed,
                torch_random_seed=seed,
                fewshot_random_seed=seed,
                bootstrap_iters=bootstrap_iters,
            )
    finally:
        quiet.setLevel(level)
        if single is None:
            os.environ.pop(NO_POOL, None)
    return {
        "metrics": flatten(out["results"]),
        "results": out["results"],
        "samples": out.get("samples") if log_samples else None,
        "versions": dict(out.get("versions", {})),
        "n_samples": out.get("n-samples", {}),
    }


def flatten(results: dict) -> dict[str, float]:
    """{task: {"acc,none": v, "acc_stderr,none": s, "alias": ...}} -> {"harness/task/acc": v,
    "harness/task/acc_stderr": s}; values that are not numbers ("N/A") or not finite (the
    perplexity of a model that gives a target no probability) are left out: a run's summary and
    trackers hold finite figures only."""
    out = {}
    for task, values in results.items():
        for key, value in values.items():
            if (
                "," not in key
                or isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
            ):
                continue
            metric, _, filt = key.partition(",")
            name = f"{PREFIX}/{task}/{metric}" if filt in ("none", "") else f"{PREFIX}/{task}/{filt}/{metric}"
            out[name] = float(value)
    return out


def table(metrics: dict[str, float]) -> str:
    """The metrics as a text table: task, metric, value, ± its standard error where known."""
    rows = []
    for name, value in metrics.items():
        if name.endswith("_stderr"):
            continue
        task, _, metric = name[len(PREFIX) + 1 :].partition("/")
        err = metrics.get(f"{name}_stderr") if "/" not in metric else None
        rows.append((task, metric, f"{value:.4f}", f"± {err:.4f}" if err is not None else ""))
    head = ("task", "metric", "value", "stderr")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(head), line(tuple("-" * w for w in widths))] + [line(r) for r in rows])
