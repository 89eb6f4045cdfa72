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

`joint(axes, valid)` is the same greedy idea for a product too large to enumerate (every model
axis at once). A pair `valid` refuses alone (the other axes at their defaults) is set aside and
returned as refused, for a test to check that it is refused as the config says. A row grows
from an uncovered pair, taking axis by axis the value that covers the most new pairs among
those whose every pair with the row is accepted (an axis with no such value stays at its
default, None in the row: RoPE's scaling in a row without RoPE); the best of a few such rows is
kept, once `valid` accepts it whole.
"""

from __future__ import annotations

import heapq
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
    "qk_norm": "model.qk_norm",
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


def joint(
    axes: Mapping[str, Sequence[Any]], valid: Callable[[dict[str, Any]], bool], candidates: int = 8
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows, refused pairs) of a pairwise design over `axes`, built row by row without the
    product: every pair of values of two axes is in a row unless `valid` refuses the pair alone
    ({axis: value, axis: value}, the other axes unset), and then it is a refused pair. Each row
    is the best of `candidates` rows, each grown from one of the first uncovered pairs."""
    names = list(axes)
    if len(names) < 2 or any(len(values) == 0 for values in axes.values()):
        raise ValueError(f"a joint design takes two axes or more, each with a value: {dict(axes)}")
    index = {name: k for k, name in enumerate(names)}
    position = {(name, v): k for name in names for k, v in enumerate(axes[name])}

    def pair(a: str, va: Any, b: str, vb: Any) -> tuple[str, Any, str, Any]:
        return (a, va, b, vb) if index[a] < index[b] else (b, vb, a, va)

    def order(p: tuple[str, Any, str, Any]) -> tuple[int, int, int, int, int]:
        a, va, b, vb = p  # the largest axes first, then axis and value order: deterministic
        return (-len(axes[a]) * len(axes[b]), index[a], index[b], position[a, va], position[b, vb])

    every = {pair(a, va, b, vb) for a, b in itertools.combinations(names, 2) for va in axes[a] for vb in axes[b]}
    accepted = {p: valid({p[0]: p[1], p[2]: p[3]}) for p in every}
    refused = [{p[0]: p[1], p[2]: p[3]} for p in sorted(every, key=order) if not accepted[p]]
    uncovered = {p for p in every if accepted[p]}

    def grow(a: str, va: Any, b: str, vb: Any, exact: bool) -> dict[str, Any]:
        """A row holding (a, va, b, vb), each other axis the value of most new pairs among those
        whose pairs with the row are accepted (exact: whose row `valid` accepts)."""
        row = {a: va, b: vb}
        for name in names:
            if name in row:
                continue
            best, gain = None, -1
            for value in axes[name]:
                held = [pair(x, row[x], name, value) for x in row if row[x] is not None]
                if not all(accepted[p] for p in held) or (exact and not valid({**row, name: value})):
                    continue
                new = sum(p in uncovered for p in held)
                if new > gain:  # the first of the best
                    best, gain = value, new
            row[name] = best  # None where no value is accepted: the axis at its default
        return {name: row[name] for name in names}

    def covers(row: dict[str, Any]) -> set[tuple[str, Any, str, Any]]:
        return {(x, row[x], y, row[y]) for x, y in itertools.combinations(names, 2)} & uncovered

    rows: list[dict[str, Any]] = []
    while uncovered:
        grown = sorted(
            (grow(*p, exact=False) for p in heapq.nsmallest(candidates, uncovered, key=order)),
            key=lambda r: -len(covers(r)),  # stable: the first of the best
        )
        # the best that `valid` accepts whole; else (a refusal of three kinds at once) the first
        # pair grown checking each value
        row = next((r for r in grown if valid(r)), None) or grow(*min(uncovered, key=order), exact=True)
        uncovered -= covers(row)
        rows.append(row)
    return rows, refused


def each_once(
    axes: Mapping[str, Sequence[Any]], valid: Callable[[dict[str, Any]], bool]
) -> tuple[list[dict[str, Any]], list[tuple[str, Any]]]:
    """(rows, values no row takes): every value of every axis in some row (strength one: what a
    check of each kind alone needs, in as many rows as the largest axis has values, or a few
    more). A row takes, axis by axis, the first value not yet in a row that `valid` accepts with
    the row so far (the axes not yet chosen at their defaults), else leaves the axis at its
    default (None); a value `valid` refuses alone is returned, not placed."""
    left = [(name, value) for name, values in axes.items() for value in values if valid({name: value})]
    refused = [(name, value) for name, values in axes.items() for value in values if (name, value) not in left]
    rows: list[dict[str, Any]] = []
    while left:
        row: dict[str, Any] = {}
        for name in axes:
            row[name] = next((v for n, v in left if n == name and valid({**row, name: v})), None)
        if all(row[name] is None for name in axes):
            raise ValueError(f"no row takes any of {left}")
        left = [(n, v) for n, v in left if row[n] != v]
        rows.append(row)
    return rows, refused


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
