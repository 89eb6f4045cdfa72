"""benchmarks/mutate.py's named bugs and targets name the code and tests as they are: a planted
bug whose text has left its file would be reported as "missed" by a run that changed nothing."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # as tests/test_doc_figures.py reads doc_tables
import mutate as bench  # noqa: E402


def test_every_planted_bug_edits_its_file_at_exactly_one_place_and_its_tests_exist():
    assert len(bench.PLANTED) >= 5
    for name, path, old, new, *tests in bench.PLANTED:
        source = (ROOT / path).read_text()
        assert source.count(old) == 1, (name, path, old)
        assert old != new and source.replace(old, new) != source
        for test in tests[0] if tests else bench.tests_for(path):
            if test.startswith("tests/"):
                assert (ROOT / test.partition("::")[0]).is_file(), (name, test)


def test_every_core_module_has_tests_named_and_they_exist():
    for path in bench.CORE:
        assert (ROOT / path).is_file(), path
        named = [t for t in bench.tests_for(path) if t.startswith("tests/")]
        assert named and all((ROOT / t.partition("::")[0]).exists() for t in named), (path, named)
