"""The fast tier (`pytest -m "not slow"`) starts no process of zoo's: a test whose own body starts
a Python interpreter (`subprocess`, `sys.executable`, `zoo_train`, which runs `python -m
zoo.cli.train`) is marked `slow`, since each such process imports Lightning and torch (seconds of
CPU) before it does anything. The few that start an interpreter without importing zoo are listed
with why they are cheap. Read from the test files' syntax trees, so a mark removed or a process
added to a fast test fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
STARTS = re.compile(r"\bsubprocess\.|\bPopen\(|\bsys\.executable\b|\bzoo_train\(")
# fast tests that start an interpreter importing neither zoo nor torch, and why
CHEAP = {
    "tests/models/test_budget.py::test_a_budget_is_met_without_torch": "runs the counts with torch unimportable",
    "tests/config/records/test_atomic.py::test_a_kill_during_the_write_leaves_the_previous_record": (
        "a script of the standard library and zoo.config.records.atomic, no torch"
    ),
    "tests/config/records/test_atomic.py::test_the_record_has_the_permissions_of_the_umask": (
        "a script of the standard library and zoo.config.records.atomic, no torch"
    ),
    "tests/data/test_cache_integrity.py::test_a_shared_tokenizer_cache_entry_follows_the_umask": (
        "a script of zoo.data.tokenizers training a 60-piece tokenizer under a umask, no torch"
    ),
}


def _text(lines: list[str], node: ast.stmt | ast.expr) -> str:
    """The source lines `node` spans (ast.get_source_segment without its per-call line split)."""
    return "".join(lines[node.lineno - 1 : node.end_lineno])


def _marked(decorators: list[ast.expr], lines: list[str], names: tuple[str, ...]) -> bool:
    return any(any(f"mark.{n}" in _text(lines, d) for n in names) for d in decorators)


def fast_tests_that_start_processes() -> list[str]:
    found = []
    for path in sorted(TESTS.rglob("test_*.py")):
        source = path.read_text(encoding="utf-8")
        if not STARTS.search(source):  # nothing in the file could start one
            continue
        tree, lines = ast.parse(source), source.splitlines(keepends=True)
        module_marks = [n.value for n in tree.body if isinstance(n, ast.Assign) and "pytestmark" in ast.unparse(n)]
        if _marked(module_marks, lines, ("slow", "gpu")):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test_"):
                continue
            if _marked(node.decorator_list, lines, ("slow", "gpu")):
                continue
            if STARTS.search(_text(lines, node)):
                found.append(f"{path.relative_to(TESTS.parent)}::{node.name}")
    return found


def test_no_fast_test_starts_a_process_of_zoo():
    assert [t for t in fast_tests_that_start_processes() if t not in CHEAP] == []


def test_the_cheap_list_names_only_fast_tests_that_start_an_interpreter():
    assert sorted(CHEAP) == sorted(t for t in fast_tests_that_start_processes() if t in CHEAP)


def test_the_check_finds_a_process_in_a_fast_test(tmp_path, monkeypatch):
    """It can fail: a fast test that starts one is named."""
    call = ".".join(("subprocess", "run"))  # written apart, or this test would be one it finds
    (tmp_path / "test_planted.py").write_text(
        f"import subprocess, sys\n\n\ndef test_x():\n    {call}(['python', '-c', 'import zoo'])\n"
    )
    monkeypatch.setattr(f"{__name__}.TESTS", tmp_path)
    assert [Path(t).name for t in fast_tests_that_start_processes()] == ["test_planted.py::test_x"]
