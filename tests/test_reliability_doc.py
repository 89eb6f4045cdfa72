"""docs/reliability.md names, for each class of untrusted input and mistake, the tests that keep it
closed (`tests/PATH.py::test_name`): each named test exists, so a renamed or deleted test cannot
leave the page pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reliability.md"
NAMED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def named_tests(text: str) -> list[tuple[str, str]]:
    return NAMED.findall(text)


def missing(text: str) -> list[str]:
    gone = []
    for path, name in named_tests(text):
        source = ROOT / path
        if not source.is_file() or not re.search(rf"^def {name}\(", source.read_text(), flags=re.M):
            gone.append(f"{path}::{name}")
    return gone


def test_every_test_the_page_names_exists():
    named = named_tests(PAGE.read_text())
    assert len(named) >= 40  # the page's tables, not a stray mention
    assert missing(PAGE.read_text()) == []


def test_a_name_that_does_not_exist_is_caught():
    assert missing("`tests/test_reliability_doc.py::test_nothing_of_the_kind`") == [
        "tests/test_reliability_doc.py::test_nothing_of_the_kind"
    ]
    assert missing("`tests/no_such_file.py::test_x`") == ["tests/no_such_file.py::test_x"]
