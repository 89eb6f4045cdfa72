"""Two or more keys tuned together (`tune=optim.lr,optim.weight_decay`): each arm is taken at its
best combination of their values, as one key whose value is the combination.

Optimizers are compared each at its own rate and weight decay (Wen et al. 2025, "Fantastic
Pretraining Optimizers and Where to Find Them": tuning one and sharing the other is where most
reported speedups come from). A joint key is written as the keys joined by commas; each run's
value of it is its values of the keys, in that order, joined by ", " (`0.002, 0.1`), so the
held-out choice, the tuning curve and heldout.csv treat a combination as one value tried. The
component keys leave the run's settings (they are the joint key's), and runs.csv holds the joint
column, from which a rebuild (`recompute=`) reads the same combinations."""

from __future__ import annotations

import dataclasses
from typing import Any

from zoo.compare.errors import CompareError
from zoo.compare.runs import IGNORED, Run

SEP = ","  # between the keys of a joint key
VALUE_SEP = ", "  # between the values of a run's combination


def components(key: str) -> list[str]:
    """The keys of a joint key (one for a plain key)."""
    return [k.strip() for k in key.split(SEP)]


def is_joint(key: str | None) -> bool:
    return key is not None and SEP in key


def joined(runs: list[Run], key: str) -> list[Run]:
    """`runs` with the joint key's combination set and its component keys dropped from each
    config (a run that already holds the joint key, read back from runs.csv, as it is). A key
    not joint: `runs` unchanged."""
    if not is_joint(key):
        return runs
    keys = components(key)
    if len(set(keys)) != len(keys) or not all(keys):
        raise CompareError(f"tune={key}: name each key once, e.g. tune=optim.lr,optim.weight_decay")
    for k in keys:
        if k.startswith(IGNORED):
            raise CompareError(f"tune={key}: {k} does not change what is learned; tune training or model keys")
    out = []
    for run in runs:
        if key in run.config or not run.config:  # read back from runs.csv; a run with no config (damaged)
            out.append(run)
            continue
        missing = [k for k in keys if k not in run.config]
        if missing:
            raise CompareError(f"tune={key}: {run.path} has no config key {missing[0]}")
        shown = [str(run.config[k]) for k in keys]
        listed = next((k for k, v in zip(keys, shown, strict=True) if VALUE_SEP in v), None)
        if listed is not None:
            raise CompareError(f"tune={key}: {listed} holds a list ({run.config[listed]}); tune single values together")
        config = {k: v for k, v in run.config.items() if k not in keys}
        config[key] = VALUE_SEP.join(shown)
        out.append(dataclasses.replace(run, config=config))
    return out


def split(key: str, value: Any) -> dict[str, float | str]:
    """{component key: its value} of one combination (numbers read back as numbers)."""
    parts = str(value).split(VALUE_SEP)
    out: dict[str, float | str] = {}
    for k, part in zip(components(key), parts, strict=True):
        try:
            out[k] = float(part)
        except ValueError:
            out[k] = part
    return out


def order(key: str, value: Any) -> tuple:
    """A combination's place in a curve: by its first key's value, then the next's (numbers as
    numbers, so 1e-05 comes before 0.01)."""
    return tuple((0, v, "") if isinstance(v, float) else (1, 0.0, str(v)) for v in split(key, value).values())


def at_zero(numbers: list[float]) -> bool:
    """Whether the lowest of `numbers` is 0 and none is negative: a bound (a weight decay, a
    dropout, a warmup of 0), not an edge with better values beyond it."""
    return min(numbers) == 0 and all(n >= 0 for n in numbers)


def edges(key: str, values: list[Any], best: Any) -> list[str]:
    """The component keys at whose lowest or highest value tried the best combination lies (the
    best may lie beyond the grid along them), each as "KEY=VALUE (lowest|highest)"; a lowest
    value of 0 among values none of which is negative is a bound, not an edge."""
    tried = [split(key, v) for v in values]
    chosen = split(key, best)
    said = []
    for k in components(key):
        numbers = [v for v in (t[k] for t in tried) if isinstance(v, float)]
        if len(set(numbers)) < 2 or not isinstance(chosen[k], float):
            continue
        if chosen[k] == max(numbers):
            said.append(f"{k}={chosen[k]:g} (highest)")
        elif chosen[k] == min(numbers) and not at_zero(numbers):
            said.append(f"{k}={chosen[k]:g} (lowest)")
    return said


def edge_clause(key: str, values: list[Any], best: Any) -> str | None:
    """Where `best`, the best of the `values` of `key` tried, lies at an end of them, said as a
    clause ("its best KEY=V is the highest value tried", or along which parts of a joint key);
    None where it is inside them, the values are words (model.norm=pre,post has no beyond), or
    only one was tried. The warnings of tune= and scale= read it."""
    if len(values) < 2:
        return None
    if is_joint(key):
        at = edges(key, values, best)
        return f"its best {key}=({best}) is at the edge of the grid in {', '.join(at)}" if at else None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return None
    numbers = [float(v) for v in values]
    if float(best) == max(numbers):
        return f"its best {key}={best} is the highest value tried"
    if float(best) == min(numbers) and not at_zero(numbers):
        return f"its best {key}={best} is the lowest value tried"
    return None
