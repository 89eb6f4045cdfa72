"""Covering designs for the model grids: every pair of values of any two axes in few rows.

A test over family × position × placement × norm × activation need not build every cell of the
product (3 × 7 × 4 × 2 × 6 = 1,008 models) to meet every interaction of two kinds: a pairwise
design holds every pair of values of any two axes in at least one row, about as many rows as
the two largest axes' product (42 here). Bugs that need three kinds at once are what the
per-kind contract tests (`tests/contract/`) and the hand-worked unit tests are for.

`pairwise(axes, valid)` is a deterministic greedy construction over the valid cells of the
product: each row taken is the first cell that covers the most pairs not yet covered. A cell
`valid` refuses (a combination the config refuses) is never a row, and every pair that some
valid cell holds is still covered: pairs are dropped only where no valid cell has them. The
axes come from the enums and fact tables (`AXIS`, `zoo/config/facts/axes.py`), so a new kind
joins every design as soon as its row exists, adding a few rows rather than a slice of the
product. `cases(...)` gives the rows as `pytest.param`s with ids of their values, joined by
"-" as pytest's own grids are.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pytest

from zoo.config.facts.axes import axis

# the product a design is chosen from is enumerated: past this many cells, split the grid
MAX_CELLS = 200_000


def kinds(key: str) -> list[str]:
    """The kinds of the registered axis `key` ("model.norm_type"), in enum order."""
    return [kind.value for kind in axis(key).kinds]


# the model axes of the grids, by the keyword `tests/conftest.py`'s `tiny` takes
AXIS = {
    "family": "model.family",
    "position": "model.position.kind",
    "norm": "model.norm",
    "norm_type": "model.norm_type",
    "activation": "model.activation",
    "block": "model.block",
}


def model_axes(*names: str) -> dict[str, list[str]]:
    """{name: kinds} of the model axes `names` (keys of `AXIS`), in the order given."""
    return {name: kinds(AXIS[name]) for name in names}


def _pairs(row: Sequence[Any]) -> set[tuple[int, Any, int, Any]]:
    return {(i, row[i], j, row[j]) for i, j in itertools.combinations(range(len(row)), 2)}


def pairwise(
    axes: Mapping[str, Sequence[Any]], valid: Callable[[dict[str, Any]], bool] | None = None
) -> list[dict[str, Any]]:
    """Rows {axis: value} holding every pair of values of any two axes that a valid cell holds."""
    names = list(axes)
    if not names or any(len(values) == 0 for values in axes.values()):
        raise ValueError(f"every axis needs a value: {dict(axes)}")
    size = 1
    for values in axes.values():
        size *= len(values)
    if size > MAX_CELLS:
        raise ValueError(f"a product of {size:,} cells is past {MAX_CELLS:,}: split the grid")
    cells = [
        cell
        for cell in itertools.product(*axes.values())
        if valid is None or valid(dict(zip(names, cell, strict=True)))
    ]
    if not cells:
        raise ValueError("no valid cell")
    if len(names) == 1:
        return [{names[0]: cell[0]} for cell in cells]
    held = [_pairs(cell) for cell in cells]
    uncovered = set().union(*held)
    rows: list[dict[str, Any]] = []
    while uncovered:
        best = max(range(len(cells)), key=lambda k: len(held[k] & uncovered))  # the first of the best: deterministic
        uncovered -= held[best]
        rows.append(dict(zip(names, cells[best], strict=True)))
    return rows


def covered_pairs(rows: Iterable[Mapping[str, Any]]) -> set[tuple[str, Any, str, Any]]:
    """Every (axis, value, axis, value) pair the rows hold, axes in the rows' order."""
    out: set[tuple[str, Any, str, Any]] = set()
    for row in rows:
        names = list(row)
        out |= {(a, row[a], b, row[b]) for a, b in itertools.combinations(names, 2)}
    return out


def cases(axes: Mapping[str, Sequence[Any]], valid: Callable[[dict[str, Any]], bool] | None = None) -> list[Any]:
    """`pairwise(axes, valid)` as `pytest.param`s of the axes' values in order, for
    `pytest.mark.parametrize(", ".join(axes), cases(axes))`."""
    rows = pairwise(axes, valid)
    return [pytest.param(*row.values(), id="-".join(str(v) for v in row.values())) for row in rows]
