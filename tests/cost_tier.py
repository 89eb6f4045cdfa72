"""The fast tier by measured cost: a test that took longer than BUDGET_S seconds in a run of the
fast tier is marked `slow`, so `pytest -m "not slow"` stays a loop of a minute or two while the
whole suite still runs every test.

The tests over the budget are listed by node id in SLOW_BY_COST (a function's id where every case
it had was over, so its new cases go with it); `tests/conftest.py` marks them `slow` as the suite
is collected, before `-m` selects. The list is written from a JUnit report, not by hand:

    pytest -n 2 -m "not slow" --junitxml=fast.xml && python -m tests.cost_tier fast.xml

adds the fast tests of that report that were over the budget and keeps the entries that are
still tests; `tests/test_testing_doc.py` fails while an entry names no collected test. A test
that starts a process is marked `slow` in its source instead (`tests/test_tiers.py`), and a new
test is fast until a report says otherwise. The budget is the time on the reference machine
(2 CPU cores, one worker a core; docs/testing.md), where importing torch and composing one
configuration with Hydra take about 0.2 s: the tests that compose, compile, plan on fake
tensors, train for steps or rebuild a report go to the whole suite."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLOW_BY_COST = Path(__file__).resolve().parent / "slow_by_cost.txt"
BUDGET_S = 0.2
HEADER = (
    "# Tests marked slow by their measured time (tests/cost_tier.py): over "
    f"{BUDGET_S} s each in a run of the fast tier on 2 CPU cores.\n"
    "# Written by `python -m tests.cost_tier JUNIT.xml`; a line is a node id, or a function's id for all its cases.\n"
)


def entries(path: Path = SLOW_BY_COST) -> set[str]:
    """The node ids (or function ids) the file lists."""
    if not path.is_file():
        return set()
    lines = (line.rstrip("\n") for line in path.read_text(encoding="utf-8").splitlines())
    return {line for line in lines if line and not line.startswith("#")}


def listed(nodeid: str, ids: set[str]) -> bool:
    """Whether a test is over the budget: its own id or its function's is listed."""
    return nodeid in ids or nodeid.partition("[")[0] in ids


def _nodeid(classname: str, name: str) -> str:
    """A JUnit test case's node id: `tests.a.test_b` + `test_c[x]` -> `tests/a/test_b.py::test_c[x]`
    (a test class's name, where there is one, stays after the file's)."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = Path(*parts[:cut]).with_suffix(".py")
        if (ROOT / path).is_file():
            return "::".join([path.as_posix(), *parts[cut:], name])
    raise ValueError(f"no test file for the JUnit class {classname!r}")


def slow_ids(report: Path) -> set[str]:
    """The ids a JUnit report puts over the budget (its skipped tests aside): a function's id
    where every case it ran was over, else each case's own id."""
    cases: dict[str, list[tuple[str, bool]]] = {}  # function id -> [(node id, over the budget)]
    for case in ET.parse(report).getroot().iter("testcase"):
        if case.find("skipped") is not None:
            continue
        nodeid = _nodeid(case.get("classname", ""), case.get("name", ""))
        cases.setdefault(nodeid.partition("[")[0], []).append((nodeid, float(case.get("time", 0)) > BUDGET_S))
    out = set()
    for function, ran in cases.items():
        over = [nodeid for nodeid, slow in ran if slow]
        out |= {function} if len(ran) > 1 and len(over) == len(ran) else set(over)
    return out


def write(ids: Iterable[str], path: Path = SLOW_BY_COST) -> None:
    path.write_text(HEADER + "".join(f"{i}\n" for i in sorted(set(ids))), encoding="utf-8")


def stale(ids: set[str], collected: Iterable[str]) -> list[str]:
    """The listed ids that name no collected test (renamed or removed since)."""
    nodeids = list(collected)
    known = set(nodeids) | {n.partition("[")[0] for n in nodeids}
    return sorted(i for i in ids if i not in known)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_file():
        sys.exit("usage: python -m tests.cost_tier JUNIT.xml (a report of `pytest -m 'not slow' --junitxml=...`)")
    before = entries()
    write(before | slow_ids(Path(sys.argv[1])))
    print(f"{SLOW_BY_COST.relative_to(ROOT)}: {len(entries())} entries ({len(entries() - before)} new)")
