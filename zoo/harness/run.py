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

from zoo.config.errors import ConfigError, ZooError
from zoo.config.schema.harness import check_limit
from zoo.data.errors import DataError
from zoo.harness.tasks import BUILT_IN, materialize

DEFAULT_MAX_GEN_TOKS = 256  # the harness's own default for generate_until

PREFIX = "harness"
PIN = "lm_eval==0.4.13"  # the extra zoo[eval]
BOOTSTRAP_ITERS = 1000  # draws for a bootstrapped standard error (the harness's default is 100,000)
NO_POOL = "DISABLE_MULTIPROC"  # the harness's switch: bootstrap in this process
HUB_TIMEOUT_S = 10  # how long the Hugging Face Hub may take to answer before a task is refused


class HubUnreachable(ZooError, OSError):
    """A harness task's dataset lives on the Hugging Face Hub and the Hub does not answer: the
    machine's network, not the command, is at fault (exit status 1)."""

    exit_status = 1


def require_lm_eval() -> None:
    """One line, before anything loads, when the extra is not installed."""
    if importlib.util.find_spec("lm_eval") is None:
        raise ConfigError(
            f"harness= needs lm-evaluation-harness: pip install '.[eval]' in zoo's source directory (or pip install {PIN})"
        )


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


def load_tasks(names: list[str], *, num_fewshot: int | None = None, cache_dir: str | None = None, manager=None) -> dict:
    """The harness's tasks `names` loaded (their datasets read) and set up as its `simple_evaluate`
    sets them up, before anything is scored: {"tasks": {name: Task}, "groups": ...}. A task whose
    dataset is on an unreachable Hub, or cannot be loaded, and a `num_fewshot` beyond a task's
    pool of examples are each refused on one line; loaded once, the tasks are scored any number
    of times (`evaluate_tasks`) without reading their files again."""
    manager = manager or task_manager(names, cache_dir)
    outside = [n for n in names if n not in BUILT_IN]
    if outside:
        _check_hub(outside)
    import datasets

    shown = not datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # a line per split read: a refusal after it is one line
    try:
        loaded = manager.load(names)
    except ZooError:
        raise
    except Exception as exc:  # noqa: BLE001 - the dataset or the task's files: said on one line
        raise DataError(f"harness task(s) {', '.join(names)} cannot be loaded: {_first_line(exc)}") from None
    finally:
        if shown:
            datasets.enable_progress_bars()
    for name, task in loaded["tasks"].items():
        default = task.get_config("num_fewshot")
        if num_fewshot is not None and default != 0:  # a task that fixes 0 keeps it, as the harness does
            task.set_config(key="num_fewshot", value=num_fewshot)
        elif default is None:
            task.set_config(key="num_fewshot", value=0)
        _check_pool(name, task, given=num_fewshot is not None and default != 0)
    return loaded


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__


def _check_hub(names: list[str]) -> None:
    """The Hugging Face Hub answers within HUB_TIMEOUT_S (one request, no retries), unless the
    user asked for its offline mode (HF_HUB_OFFLINE=1: the datasets come from the local cache).
    Without this, an unreachable Hub costs five retries and a long traceback."""
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    if constants.is_offline_mode():
        return
    try:
        get_session().head(constants.ENDPOINT, timeout=HUB_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - no answer of any kind: the network, a proxy, DNS
        raise HubUnreachable(
            f"harness task(s) {', '.join(names)} read their datasets from the Hugging Face Hub "
            f"({constants.ENDPOINT}), which cannot be reached ({type(exc).__name__}); run where it "
            f"can, set HF_HUB_OFFLINE=1 to use datasets already in the local cache, or score the "
            f"built-in tasks ({', '.join(BUILT_IN)})"
        ) from None


def _check_pool(name: str, task, *, given: bool) -> None:
    """The task has num_fewshot examples to show before a question (the harness draws them from
    its few-shot split and leaves out the question itself where that split is the one scored)."""
    shots = task.get_config("num_fewshot") or 0
    if shots <= 0:
        return
    sampler = getattr(task, "sampler", None)
    pool = len(sampler.fewshot_docs()) if sampler is not None else 0
    fewshot = getattr(task, "fewshot_cfg", None)
    itself = fewshot is not None and fewshot.split == task.config.test_split
    most = max(pool - 1, 0) if itself and pool else pool
    if shots > most:
        where = "num_fewshot" if given else "the task's own num_fewshot"
        raise ConfigError(
            f"{where}={shots}: harness task {name} has {most} examples to show before a question; "
            f"give num_fewshot={most} or less"
        )


def check_room(tasks: dict, positions: int | None, whose: str = "the model's") -> None:
    """A generating task's new tokens fit in the model's positions (`positions`: where a bounded
    scheme's end; None: unbounded): the prompt is cut on the left to make room for them, down to
    one token, and no further (a learned table has no position past its end)."""
    if positions is None:
        return
    for name, task in tasks["tasks"].items():
        if task.get_config("output_type") != "generate_until":
            continue
        options = task.get_config("generation_kwargs") or {}
        new = int(options.get("max_gen_toks", DEFAULT_MAX_GEN_TOKS))
        if new > positions:
            raise ConfigError(
                f"harness task {name} generates up to {new} tokens after its prompt, past {whose} "
                f"positions (model.max_seq_len={positions}); score it on a model whose "
                f"model.max_seq_len is {new} or more, or leave the task out"
            )


def evaluate_tasks(
    lm,
    tasks: dict | list[str],
    *,
    limit: float | None = None,
    num_fewshot: int | None = None,
    seed: int = 0,
    cache_dir: str | None = None,
    log_samples: bool = False,
    manager=None,
    bootstrap_iters: int = BOOTSTRAP_ITERS,
) -> dict:
    """The harness's `evaluate` on `lm` (a `ZooLM` or any harness model) over `tasks` (what
    `load_tasks` gave, or names to load now with `num_fewshot` and `manager`): {"metrics": {harness/TASK/METRIC:
    value}, "results": the harness's own results, "samples": its per-sample records when
    `log_samples`}. Seeded as `simple_evaluate` seeds it (Python, NumPy, torch, the few-shot
    draws: the same examples each time). Standard errors: closed-form for means, bootstrapped
    (`bootstrap_iters` draws, in this process: the harness's pool of one process per core would
    fork a training run) for perplexity; 0 leaves them out. Called as zoo calls it, the harness
    runs no `git` and no survey of the machine (what `simple_evaluate` adds to its results)."""
    import contextlib
    import os
    import random
    import sys

    import numpy as np
    import torch
    from lm_eval import evaluator

    check_limit("limit", limit)
    if isinstance(tasks, dict):
        loaded = tasks
    else:
        loaded = load_tasks(list(tasks), num_fewshot=num_fewshot, cache_dir=cache_dir, manager=manager)
    for task in loaded["tasks"].values():
        task.set_fewshot_seed(seed=seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    quiet = logging.getLogger("lm_eval")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the harness logs every step at INFO/WARNING
    single = os.environ.get(NO_POOL)
    os.environ[NO_POOL] = "1"
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the harness prints its progress: stdout is the table's
            out = evaluator.evaluate(
                lm=lm,
                task_dict=loaded,
                limit=limit,
                log_samples=log_samples,
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
