"""Length extrapolation (Press et al. 2022, "Train Short, Test Long"): validation perplexity of
each finished causal-LM run at multiples of the context it was trained on.

Every run is evaluated on its own validation split (the same texts at every length: the split
is made on rows before packing) with about `tokens` tokens per length. A bounded scheme (a
learned position table; `zoo.config.facts.positions.max_positions`) cannot reach past
`model.max_seq_len`; those cells are reported as such, not left out. Results are cached in the
run directory (`lengths.json`), so a second comparison costs nothing."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from zoo.compare.runs import Run, RunStatus
from zoo.compare.stats import mean_std
from zoo.config.facts.positions import max_positions
from zoo.config.facts.tasks import kinds_that
from zoo.config.records.atomic import write_text
from zoo.config.records.reader import DamagedRecord, figure_problem, read_json_object
from zoo.config.records.rundir import RunDir
from zoo.training.checkpoint.files import load_checkpoint
from zoo.training.evaluate import evaluate

PAST_TABLE = "past the learned table"

# the tasks whose validation loss is next-token cross-entropy over windows of data.seq_len, so
# that its exponential is a perplexity at that length: their rows pack and shift (causal_lm)
WINDOWED_LMS = frozenset(kinds_that("packs")) & frozenset(kinds_that("shifted"))


def evaluate_lengths(run: Run, multiples: list[int], tokens: int = 65536) -> dict[int, object]:
    """{multiple: perplexity, or PAST_TABLE} for one finished causal-LM run (cached)."""
    cache_file = RunDir(run.path).lengths
    cached = _read_cache(cache_file, run.path)
    wanted = [m for m in multiples if str(m) not in cached]
    if wanted:
        task = load_checkpoint(RunDir(run.path).last)  # the model the summary reports
        data = dict(task.extras.data or {})
        trained = int(data["seq_len"])
        bound = max_positions(task.model.config)
        for m in wanted:
            length = trained * m
            if bound is not None and length > bound:
                cached[str(m)] = PAST_TABLE
                continue
            batch = max(1, tokens // (length * 16))
            result = evaluate(task, {**data, "seq_len": length}, batch_size=batch, limit_batches=16)
            cached[str(m)] = math.exp(min(result["metrics"]["loss"], 50.0))
        write_text(cache_file, json.dumps(cached, indent=1))
    return {m: cached[str(m)] for m in multiples}


def _read_cache(cache_file: Path, run_dir: Path) -> dict[str, object]:
    """The perplexities a comparison measured before, through the one reader of files zoo reads
    back; a cache that is damaged, not a regular file or a link out of the run is measured again
    (a plain json.loads crashed on it, and a pipe there hung zoo-compare), and an entry that is
    neither a plausible perplexity nor PAST_TABLE is dropped."""
    if not (cache_file.exists() or cache_file.is_symlink()):
        return {}
    try:
        cached = read_json_object(cache_file, root=run_dir)
    except DamagedRecord:
        return {}
    return {
        k: v
        for k, v in cached.items()
        if v == PAST_TABLE
        or (isinstance(v, (int, float)) and not isinstance(v, bool) and figure_problem("ppl", v) is None)
    }


def length_table(arms, multiples: list[int]) -> list[dict]:
    """Per arm: {multiple: (mean ppl, std, n) or PAST_TABLE}, over its finished causal-LM runs."""
    rows = []
    for arm in arms:
        runs = [r for r in arm.runs if r.status == RunStatus.finished and r.summary.get("task") in WINDOWED_LMS]
        per_run = [evaluate_lengths(r, multiples) for r in runs]
        cells: dict[int, Any] = {}  # PAST_TABLE, (mean, std, n) or None
        for m in multiples:
            values = [p[m] for p in per_run]
            if values and all(v == PAST_TABLE for v in values):
                cells[m] = PAST_TABLE
            else:
                numbers = [v for v in values if isinstance(v, float)]
                cells[m] = (*mean_std(numbers), len(numbers)) if numbers else None
        rows.append({"arm": arm, "cells": cells, "trained": _trained_len(runs)})
    return rows


def _trained_len(runs: list[Run]) -> int | None:
    lengths = {r.config.get("data.seq_len") for r in runs}
    return lengths.pop() if len(lengths) == 1 else None
