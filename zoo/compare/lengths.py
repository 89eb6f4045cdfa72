"""Length extrapolation (Press et al. 2022, "Train Short, Test Long"): validation perplexity of
each finished causal-LM run at multiples of the context it was trained on.

Every run is evaluated on its own validation split (the same texts at every length: the split
is made on rows before packing) with about `tokens` tokens per length. A bounded scheme (a
learned position table; `zoo.config.facts.positions.max_positions`) cannot reach past
`model.max_seq_len`; those cells are reported as such, not left out. Results are cached in the
run directory (`lengths.json`), so a second comparison costs nothing.

With RoPE's context-extension rules (`extend=yarn`, ...: `zoo.config.facts.rope.SCALING_FACTS`),
each arm whose runs rotate with RoPE gets one more row per rule: the same checkpoints evaluated
at multiple m with the rule stretching the trained context by m (`model.position.scale=m`,
`model.position.original_max_seq_len` = the trained context), as `zoo-eval` runs them. A rule
changes buffers only, so the row costs evaluations, not training; at 1× it is plain RoPE."""

from __future__ import annotations

import json
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

from zoo.compare.runs import Run, RunStatus
from zoo.compare.stats import mean_std
from zoo.config.facts.positions import max_positions, readers
from zoo.config.facts.rope import LATENT, SCALING_FACTS, SCALING_PARAMS, RopeScaling
from zoo.config.facts.tasks import kinds_that
from zoo.config.records.atomic import write_text
from zoo.config.records.reader import DamagedRecord, figure_problem, read_json_object
from zoo.config.records.rundir import RunDir
from zoo.config.schema.position import PositionConfig
from zoo.training.checkpoint.files import load_checkpoint
from zoo.training.evaluate import evaluate

PAST_TABLE = "past the learned table"
NOT_APPLIED = "the rule does not apply"  # model.kv=latent: its shared key rotates with plain RoPE only

# the tasks whose validation loss is next-token cross-entropy over windows of data.seq_len, so
# that its exponential is a perplexity at that length: their rows pack and shift (causal_lm)
WINDOWED_LMS = frozenset(kinds_that("packs")) & frozenset(kinds_that("shifted"))


def evaluate_lengths(
    run: Run, multiples: list[int], tokens: int = 65536, rule: RopeScaling | None = None
) -> dict[int, object]:
    """{multiple: perplexity, PAST_TABLE or NOT_APPLIED} for one finished causal-LM run
    (cached), as trained or (`rule`) with RoPE stretched by each multiple."""
    cache_file = RunDir(run.path).lengths
    cached = _read_cache(cache_file, run.path)
    key = (lambda m: str(m)) if rule is None else (lambda m: f"{rule.value}:{m}")
    wanted = [m for m in multiples if key(m) not in cached]
    if wanted:
        last = RunDir(run.path).last
        if rule is None:  # one model at every length
            task = load_checkpoint(last)  # the model the summary reports
            for m in wanted:
                cached[key(m)] = _perplexity(task, m, tokens)
        elif str(run.config.get("model.kv")) == LATENT:  # its shared key rotates with plain RoPE only
            cached.update({key(m): NOT_APPLIED for m in wanted})
        else:  # the rule's frequencies differ at each multiple: a model each
            trained = int(run.config.get("data.seq_len") or load_checkpoint(last).extras.data["seq_len"])
            for m in wanted:
                task = load_checkpoint(last, rope_rule=_rope_rule(rule, m, trained), tool="zoo-compare")
                cached[key(m)] = _perplexity(task, m, tokens)
        write_text(cache_file, json.dumps(cached, indent=1))
    return {m: cached[key(m)] for m in multiples}


def _rope_rule(rule: RopeScaling, m: int, trained: int) -> list[str]:
    """`zoo-eval`'s overrides of `rule` stretching the trained context `trained` by `m` (at 1x
    every rule is plain RoPE), every key of another rule set back to its default (a checkpoint
    trained with a rule of its own keeps none of it)."""
    given = [f"model.position.scaling={rule.value}", f"model.position.scale={m}"]
    for f in fields(PositionConfig):
        if f.name in SCALING_PARAMS[1:]:
            value = trained if f.name == "original_max_seq_len" else f.default
            if f.name not in SCALING_FACTS[rule].params:
                value = f.default  # a key the rule does not read, at its default
            given.append(f"model.position.{f.name}={'null' if value is None else value}")
    return given


def _perplexity(task, m: int, tokens: int) -> object:
    """`task`'s validation perplexity at m times its trained context, or PAST_TABLE."""
    data = dict(task.extras.data or {})
    length = int(data["seq_len"]) * m
    bound = max_positions(task.model.config)
    if bound is not None and length > bound:
        return PAST_TABLE
    batch = max(1, tokens // (length * 16))
    result = evaluate(task, {**data, "seq_len": length}, batch_size=batch, limit_batches=16)
    return math.exp(min(result["metrics"]["loss"], 50.0))


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
        if v in (PAST_TABLE, NOT_APPLIED)
        or (isinstance(v, (int, float)) and not isinstance(v, bool) and figure_problem("ppl", v) is None)
    }


def length_table(arms, multiples: list[int], rules: list[RopeScaling] | tuple = ()) -> list[dict]:
    """Per arm: {multiple: (mean ppl, std, n) or a note}, over its finished causal-LM runs,
    with "rule" None; then, for each of `rules`, a row of the arms whose runs rotate with RoPE
    evaluated with that rule (`rule` set)."""
    rows = []
    rotating = readers("scaling")
    for rule in (None, *rules):
        for arm in arms:
            runs = [r for r in arm.runs if r.status == RunStatus.finished and r.summary.get("task") in WINDOWED_LMS]
            if rule is not None and not (runs and all(_kind(r) in rotating for r in runs)):
                continue
            per_run = [evaluate_lengths(r, multiples, rule=rule) for r in runs]
            rows.append({"arm": arm, "rule": rule, "cells": _cells(per_run, multiples), "trained": _trained_len(runs)})
    return rows


def _kind(run: Run) -> str | None:
    kind = run.config.get("model.position.kind")
    return str(kind) if kind is not None else None


def _cells(per_run: list[dict[int, object]], multiples: list[int]) -> dict[int, Any]:
    """{multiple: (mean, std, n) of the runs' perplexities, the note every run has, or None}."""
    cells: dict[int, Any] = {}
    for m in multiples:
        values = [p[m] for p in per_run]
        notes = {v for v in values if isinstance(v, str)}
        numbers = [v for v in values if isinstance(v, float)]
        if values and not numbers and len(notes) == 1:
            cells[m] = notes.pop()
        else:
            cells[m] = (*mean_std(numbers), len(numbers)) if numbers else None
    return cells


def _trained_len(runs: list[Run]) -> int | None:
    lengths = {r.config.get("data.seq_len") for r in runs}
    return lengths.pop() if len(lengths) == 1 else None
