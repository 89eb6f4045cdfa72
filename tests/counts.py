"""The suite's size as docs/testing.md states it: tests collected, the fast tier, the largest test
functions and what a new kind of each axis adds, from one collection.

`python -m tests.counts` collects the suite (`pytest --co`, this module as a plugin that writes
each test's id and whether it is `slow`) and rewrites the table between the page's
`<!-- counts -->` markers; `tests/test_testing_doc.py` fails while the page says other figures.

What a new kind adds is measured over the test functions that run every kind of its axis: each
adds its tests per kind (a grid over the axis is a covering design, tests/covering.py, where a
new kind takes about as many rows as a kind has; a per-kind contract test takes one).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from zoo.config.facts.axes import AXES

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "testing.md"
START, END = "<!-- counts -->", "<!-- /counts -->"
OUT = "ZOO_TEST_COUNTS"  # the file the plugin writes, from the environment
LARGEST = 5


def pytest_collection_finish(session) -> None:
    """As a plugin (`-p tests.counts`): [node id, slow] of every collected test into $ZOO_TEST_COUNTS."""
    path = os.environ.get(OUT)
    if path:
        rows = [[item.nodeid, item.get_closest_marker("slow") is not None] for item in session.items]
        Path(path).write_text(json.dumps(rows))


def collect() -> list[tuple[str, bool]]:
    """(node id, slow) of every test of the suite, from `pytest --co` in a process of its own."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "items.json"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "--co", "-q", "-n", "0", "-p", "tests.counts", "-p", "no:cacheprovider"],
            cwd=ROOT,
            env={**os.environ, OUT: str(out)},
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0 or not out.is_file():
            raise RuntimeError(f"pytest --co failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        return [(nodeid, slow) for nodeid, slow in json.loads(out.read_text())]


def _named(nodeid: str) -> list[str]:
    """The parameter values a test's id holds ("a-b-c" of "path::test[a-b-c]")."""
    return nodeid.partition("[")[2].rstrip("]").split("-") if "[" in nodeid else []


def _column(ids: list[list[str]], every: set[str]) -> int | None:
    """The column of a function's ids (all of one shape) that holds every kind of an axis, or None."""
    if not ids or len({len(i) for i in ids}) != 1:
        return None
    return next((k for k, col in enumerate(zip(*ids)) if every <= set(col)), None)


def _added(ids: list[list[str]], kinds: set[str], column: int | None = None) -> int:
    """The tests one function adds for a new kind of an axis whose kinds it all runs: its tests
    per kind where its ids are a whole product (every other column's values with each kind),
    else, a covering design, the most values any other column has (the rows the new kind needs
    to meet each of them once). `column`: where the axis's kinds are, when known."""
    per_kind = -(-sum(bool(set(i) & kinds) for i in ids) // len(kinds))
    if len({len(i) for i in ids}) != 1:
        return per_kind  # ids of different shapes: no columns to read
    columns = [set(col) for col in zip(*ids)]
    axis = [column] if column is not None else [k for k, col in enumerate(columns) if col & kinds]
    if len(axis) != 1:
        return per_kind
    per_kind = -(-len(ids) // len(columns[axis[0]]))
    others = [len(col) for k, col in enumerate(columns) if k != axis[0]]
    if math.prod(len(col) for col in columns) == len({tuple(i) for i in ids}) == len(ids):
        return math.prod(others)
    return min(per_kind, max(others, default=1))


def per_kind(items: list[tuple[str, bool]]) -> dict[str, int]:
    """{axis key: the tests a new kind of it adds}, summed over the test functions that run each
    kind of the axis (they will run a new one too; a function that picks some kinds by hand adds
    nothing). A function whose ids have columns runs an axis when one column holds all its kinds
    ("none" included: a cache's "static" and "dynamic" are not hyper-connections'); else when its
    ids name every kind whose name no other axis uses."""
    owners = Counter(kind.value for entry in AXES for kind in entry.kinds)
    functions: dict[str, list[list[str]]] = {}
    for nodeid, _ in items:
        functions.setdefault(nodeid.partition("[")[0], []).append(_named(nodeid))
    out = {}
    for entry in AXES:
        every = {kind.value for kind in entry.kinds}
        kinds = {kind.value for kind in entry.kinds if owners[kind.value] == 1}
        total = 0
        for ids in functions.values():
            if len({len(i) for i in ids}) == 1:
                column = _column(ids, every)
                total += _added(ids, every, column) if column is not None else 0
            elif kinds and kinds <= {v for i in ids for v in i}:
                total += _added(ids, kinds)
        out[entry.key] = total
    return out


def table(items: list[tuple[str, bool]]) -> str:
    """The page's block: totals, the largest functions, the tests one kind of each axis adds."""
    functions = Counter(nodeid.partition("[")[0] for nodeid, _ in items)
    fast = sum(not slow for _, slow in items)
    lines = [
        "| collected (`pytest --co -q`) | tests |",
        "|---|---|",
        f"| the whole suite | {len(items):,} |",
        f'| the fast tier (`-m "not slow"`) | {fast:,} |',
    ]
    lines += [f"| `{name}` | {count:,} |" for name, count in functions.most_common(LARGEST)]
    lines += ["", "| a new kind of | adds at most about |", "|---|---|"]
    lines += [f"| `{key}` | {count} |" for key, count in per_kind(items).items()]
    return "\n".join(lines)


def block(text: str) -> str:
    """What the page holds between its markers (ValueError without them)."""
    match = re.search(re.escape(START) + r"\n(.*?)" + re.escape(END), text, flags=re.S)
    if match is None:
        raise ValueError(f"docs/testing.md has no {START} ... {END} block")
    return match.group(1).removesuffix("\n")


def rewrite(text: str, new: str) -> str:
    block(text)
    return re.sub(re.escape(START) + r"\n.*?" + re.escape(END), lambda _: f"{START}\n{new}\n{END}", text, flags=re.S)


if __name__ == "__main__":
    PAGE.write_text(rewrite(PAGE.read_text(), table(collect())))
    print(f"rewrote the counts of {PAGE.relative_to(ROOT)}")
