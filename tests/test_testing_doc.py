"""docs/testing.md's test counts are the suite's: the table between its `<!-- counts -->` markers
is what `python -m tests.counts` writes from a collection, so a grid that grows or a tier that
moves cannot leave the page stating old figures."""

from __future__ import annotations

import pytest

from tests.cost_tier import entries, stale
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


@pytest.fixture(scope="module")
def collected():
    return collect()


@pytest.mark.slow
def test_the_pages_counts_are_the_collections(collected):
    written = table(collected)
    assert block(PAGE.read_text()) == written, "docs/testing.md's counts are stale: run `python -m tests.counts`"


@pytest.mark.slow
def test_every_test_listed_as_slow_by_its_cost_is_collected(collected):
    """tests/slow_by_cost.txt names tests that exist: a renamed or removed test's line goes."""
    ids = entries()
    assert len(ids) > 100
    assert stale(ids, [nodeid for nodeid, _ in collected]) == []
    listed = [nodeid for nodeid, slow in collected if nodeid in ids or nodeid.partition("[")[0] in ids]
    assert listed and all(slow for nodeid, slow in collected if nodeid in listed)  # and they are slow


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


def test_a_report_puts_a_test_over_the_budget_in_the_list_and_a_function_whose_cases_all_were(tmp_path):
    from tests.cost_tier import BUDGET_S, listed, slow_ids, write

    over, under = BUDGET_S + 0.5, BUDGET_S / 2
    report = tmp_path / "fast.xml"
    report.write_text(
        "<testsuites><testsuite>"
        f'<testcase classname="tests.test_testing_doc" name="test_a[x]" time="{over}"/>'
        f'<testcase classname="tests.test_testing_doc" name="test_a[y]" time="{under}"/>'
        f'<testcase classname="tests.test_testing_doc" name="test_b[x]" time="{over}"/>'
        f'<testcase classname="tests.test_testing_doc" name="test_b[y]" time="{over}"/>'
        f'<testcase classname="tests.test_testing_doc" name="test_c" time="{over}"><skipped/></testcase>'
        f'<testcase classname="tests.test_testing_doc" name="test_d" time="{under}"/>'
        "</testsuite></testsuites>"
    )
    ids = slow_ids(report)
    assert ids == {"tests/test_testing_doc.py::test_a[x]", "tests/test_testing_doc.py::test_b"}
    assert listed("tests/test_testing_doc.py::test_b[z]", ids)  # a new case of a function wholly over
    assert not listed("tests/test_testing_doc.py::test_a[y]", ids) and not listed(
        "tests/test_testing_doc.py::test_d", ids
    )
    out = tmp_path / "slow.txt"
    write(ids, out)
    from tests.cost_tier import entries

    assert entries(out) == ids and out.read_text().startswith("#")
