"""Each checklist (a README.md under zoo/ with an "## Adding" section) names files and symbols
that exist. The convention, stated in each checklist: a path in backticks, `zoo/...py` or
`conf/...yaml` or `tests/...py`, optionally followed by `:Symbol` (`path:Name` or
`path:Class.method`), the symbol defined in that file; `NAME` in a path stands for the new
part's name, so only its folder must exist. docs/extending.md points at every checklist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READMES = sorted(p for p in (ROOT / "zoo").rglob("README.md") if "## Adding" in p.read_text())
REFERENCE = re.compile(r"`((?:zoo|conf|tests)/[\w./-]*?)(?::([\w.]+))?`")


def references(readme: Path) -> list[tuple[str, str | None]]:
    return [(m.group(1), m.group(2)) for m in REFERENCE.finditer(readme.read_text())]


def defines(source: str, name: str, top_level: bool) -> bool:
    indent = "" if top_level else r"[ \t]*"
    return (
        re.search(
            rf"^{indent}(?:(?:async )?def |class ){re.escape(name)}\b|^{indent}{re.escape(name)}\s*[:=]",
            source,
            flags=re.M,
        )
        is not None
    )


def missing(readme: Path) -> list[str]:
    gone = []
    for path, symbol in references(readme):
        target = ROOT / path
        if "NAME" in path:
            target = target.parent
        if not target.exists():
            gone.append(path)
        elif symbol is not None:
            source = target.read_text() if target.is_file() else ""
            head, *rest = symbol.split(".")
            if not (defines(source, head, top_level=True) and all(defines(source, n, top_level=False) for n in rest)):
                gone.append(f"{path}:{symbol}")
    return gone


def test_there_are_checklists_for_each_kind_of_part():
    names = {p.parent.relative_to(ROOT).as_posix() for p in READMES}
    assert {"zoo/nn/position", "zoo/tasks", "zoo/data/corpora", "zoo/models"} <= names


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.parent.relative_to(ROOT).as_posix())
def test_a_checklist_names_files_and_symbols_that_exist(readme):
    found = references(readme)
    assert sum(symbol is not None for _, symbol in found) >= 3, "a checklist names the symbols it touches"
    assert missing(readme) == []


def test_docs_point_at_every_checklist():
    extending = (ROOT / "docs" / "extending.md").read_text()
    assert all(f"`{p.relative_to(ROOT).as_posix()}`" in extending for p in READMES)


def test_a_name_that_does_not_exist_is_caught(tmp_path):
    fake = tmp_path / "README.md"
    fake.write_text(
        "## Adding\n`zoo/config/facts/positions.py:POSITION_FACTS` `zoo/config/facts/positions.py:NO_SUCH_TABLE` "
        "`zoo/config/schema/model.py:PositionConfig.no_such_method` `zoo/no_such_file.py` `zoo/nn/NAME.py`\n"
    )
    assert missing(fake) == [
        "zoo/config/facts/positions.py:NO_SUCH_TABLE",
        "zoo/config/schema/model.py:PositionConfig.no_such_method",
        "zoo/no_such_file.py",
    ]


# what no checklist may ask of a new kind: the tools, validation and initialisation ask the
# kind's row (`zoo/config/facts/`), so a step that edits them for one kind is a step too many
NEEDLESS = [
    (re.compile(r"NORM_MODULES` so initiali[sz]ation|needs its rule there"), "initialisation reads the row's `starts`"),
    (re.compile(r"`zoo/cli/config_help\.py"), "--help names kinds from the enum"),
    (re.compile(r"refused on one line in `zoo/config/schema/validate\.py`"), "a refusal is the row's predicate"),
    (re.compile(r"`zoo/(?:plan|bench)/(?!peers/)[\w/]*\.py`(?![:\w])"), "zoo-plan and zoo-bench ask the row"),
]


def needless_steps(text: str) -> list[str]:
    return [why for pattern, why in NEEDLESS if pattern.search(text)]


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.parent.relative_to(ROOT).as_posix())
def test_a_checklist_asks_nothing_the_rows_do_not_enforce(readme):
    adding = readme.read_text().split("## Adding", 1)[1]
    assert needless_steps(adding) == []


def test_a_needless_step_is_caught():
    assert needless_steps("add the class to `zoo/nn/norm.py:NORM_MODULES` so initialisation starts it at 1") == [
        "initialisation reads the row's `starts`"
    ]
    assert needless_steps("its refusal, refused on one line in `zoo/config/schema/validate.py`") == [
        "a refusal is the row's predicate"
    ]
    assert needless_steps("its line in `zoo/plan/options.py`") == ["zoo-plan and zoo-bench ask the row"]
    assert needless_steps("its mapping in `zoo/bench/peers/litgpt.py:NORMS`") == []
