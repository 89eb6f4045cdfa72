"""docs/testing.md's test counts are the suite's: the table between its `<!-- counts -->` markers
is what `python -m tests.counts` writes from a collection, so a grid that grows or a tier that
moves cannot leave the page stating old figures."""

from __future__ import annotations

import pytest

from tests.counts import PAGE, block, collect, per_kind, rewrite, table
from tests.covering import cases, kinds, model_axes

POSITIONS = kinds("model.position.kind")
ITEMS = [
    *[(f"tests/models/test_a.py::test_product[{p}-{n}]", False) for p in POSITIONS for n in ("pre", "post")],
    *[
        (f"tests/models/test_a.py::test_design[{p.id}]", True)
        for p in cases(model_axes("position", "norm", "norm_type"))
    ],
    ("tests/nn/test_b.py::test_one", False),
]


@pytest.mark.slow
def test_the_pages_counts_are_the_collections():
    written = table(collect())
    assert block(PAGE.read_text()) == written, "docs/testing.md's counts are stale: run `python -m tests.counts`"


def test_the_table_counts_tiers_functions_and_what_a_new_kind_adds():
    text = table(ITEMS)
    assert "| the whole suite | 43 |" in text  # 7 x 2 + 28 + 1
    assert '| the fast tier (`-m "not slow"`) | 15 |' in text
    assert "| `tests/models/test_a.py::test_design` | 28 |" in text
    assert "| `tests/nn/test_b.py::test_one` | 1 |" in text
    added = per_kind(ITEMS)
    # a product adds its other columns' product (2 placements); the design, a row per value of its
    # largest other column (4 placements for a position; 7 positions for a placement or a norm)
    assert added["model.position.kind"] == 2 + 4
    assert added["model.norm"] == 7  # test_product runs two placements of four: a new one is not its
    assert added["model.norm_type"] == 7
    assert added["model.family"] == added["optim.kind"] == 0


def test_a_stale_figure_on_the_page_is_caught_and_rewritten():
    page = f"# Tests\n\n<!-- counts -->\n{table(ITEMS)}\n<!-- /counts -->\n\nmore\n"
    assert block(page) == table(ITEMS)
    stale = page.replace("| the whole suite | 43 |", "| the whole suite | 44 |")
    assert block(stale) != table(ITEMS)
    assert rewrite(stale, table(ITEMS)) == page
    with pytest.raises(ValueError, match="counts"):
        block("# Tests without the markers\n")


def test_the_page_has_the_block():
    assert "| the whole suite |" in block(PAGE.read_text())
