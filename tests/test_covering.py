"""The covering designs of tests/covering.py: every pair of values of any two axes in a row,
the valid cells only, far fewer rows than the product, the same rows on every run."""

from __future__ import annotations

import itertools
import math

import pytest

from tests.covering import AXIS, MAX_CELLS, cases, covered_pairs, each_once, joint, kinds, model_axes, pairwise
from zoo.config.errors import ConfigError
from zoo.config.schema.model import ModelConfig

MODEL_GRID = model_axes("family", "position", "norm", "norm_type", "activation")


def every_pair(axes, valid=None) -> set:
    """The pairs the valid cells of the whole product hold, counted cell by cell."""
    names = list(axes)
    out = set()
    for cell in itertools.product(*axes.values()):
        row = dict(zip(names, cell))
        if valid is None or valid(row):
            out |= covered_pairs([row])
    return out


@pytest.mark.parametrize(
    "names",
    [
        ("family", "position", "norm", "norm_type", "activation"),
        ("family", "position", "norm", "norm_type"),
        ("family", "position", "norm", "block"),
        ("position", "activation"),
    ],
)
def test_every_pair_of_values_of_any_two_axes_is_in_a_row(names):
    axes = model_axes(*names)
    rows = pairwise(axes)
    assert covered_pairs(rows) == every_pair(axes)
    assert all(set(row) == set(names) and all(row[a] in axes[a] for a in names) for row in rows)
    # as few rows as the two largest axes need, or a few more; the product is far larger
    two_largest = math.prod(sorted(len(v) for v in axes.values())[-2:])
    assert two_largest <= len(rows) <= two_largest + 6
    assert len(rows) * 4 <= math.prod(len(v) for v in axes.values()) or len(names) == 2


def test_the_five_axis_model_grid_is_49_rows_of_1176_cells():
    rows = pairwise(MODEL_GRID)
    assert math.prod(len(v) for v in MODEL_GRID.values()) == 1176 == 3 * 7 * 4 * 2 * 7
    assert len(rows) == 49  # 7 positions x 7 activations: the least any design can have


def test_the_same_axes_give_the_same_rows():
    assert pairwise(MODEL_GRID) == pairwise(dict(MODEL_GRID))
    assert [p.id for p in cases(MODEL_GRID)] == [p.id for p in cases(MODEL_GRID)]


def test_a_refused_cell_is_never_a_row_and_every_valid_pair_still_is():
    """parallel_two_norms refuses the post placement (`BLOCK_FACTS`): the design is drawn from
    the cells the config accepts, and each pair an accepted cell holds is in it, with
    (parallel_two_norms, post) the one pair left out."""
    axes = model_axes("family", "position", "norm", "block")

    def valid(row):
        try:
            ModelConfig(family=row["family"], position={"kind": row["position"]}, norm=row["norm"], block=row["block"])
        except ConfigError:
            return False
        return True

    rows = pairwise(axes, valid)
    assert all(valid(row) for row in rows)
    assert covered_pairs(rows) == every_pair(axes, valid)
    missing = every_pair(axes) - covered_pairs(rows)
    assert missing == {("norm", "post", "block", "parallel_two_norms")}


def test_a_design_missing_a_row_fails_the_pair_check():
    """The check above can fail: drop any one row of the 42 and a pair goes missing."""
    rows = pairwise(MODEL_GRID)
    whole = every_pair(MODEL_GRID)
    for k in range(len(rows)):
        assert covered_pairs(rows[:k] + rows[k + 1 :]) != whole


def test_a_new_kind_adds_a_few_rows_not_a_slice_of_the_product():
    """An eighth position scheme adds one position's share of the design (7 rows, one per
    activation); in the product it would add 168 cells."""
    before = pairwise(MODEL_GRID)
    after = pairwise({**MODEL_GRID, "position": [*MODEL_GRID["position"], "planted"]})
    assert len(after) - len(before) == 7
    assert covered_pairs(after) == every_pair({**MODEL_GRID, "position": [*MODEL_GRID["position"], "planted"]})


def test_the_axes_are_the_registered_kinds():
    assert kinds("model.norm_type") == ["layernorm", "rmsnorm"]
    assert set(AXIS) <= set(MODEL_GRID) | {"block", "qk_norm"}
    assert model_axes("block")["block"] == kinds("model.block")


@pytest.mark.parametrize(
    "axes, valid, says",
    [
        ({}, None, "every axis needs a value"),
        ({"a": [1, 2], "b": []}, None, "every axis needs a value"),
        ({"a": [1, 2], "b": [3]}, lambda row: False, "no valid cell"),
        ({f"a{i}": range(10) for i in range(6)}, None, "split the grid"),
    ],
)
def test_what_cannot_make_a_design_is_refused(axes, valid, says):
    with pytest.raises(ValueError, match=says):
        pairwise(axes, valid)
    assert MAX_CELLS < 10**6


def test_one_axis_is_its_values():
    assert pairwise({"norm": kinds("model.norm")}) == [{"norm": n} for n in kinds("model.norm")]


# -- joint: a design grown row by row, for a product too large to enumerate ----------------------


def _valid_block(row):
    """The config's refusal of post-norm with parallel_two_norms; an unset axis at its default."""
    kw = {k: v for k, v in row.items() if v is not None}
    try:
        ModelConfig(
            family=kw.get("family", "decoder_only"),
            position={"kind": kw.get("position", "learned")},
            norm=kw.get("norm", "pre"),
            block=kw.get("block", "sequential"),
        )
    except ConfigError:
        return False
    return True


def test_a_joint_design_holds_every_pair_but_the_refused_ones_and_only_accepted_rows():
    axes = model_axes("family", "position", "norm", "block")
    rows, refused = joint(axes, _valid_block)
    assert refused == [{"norm": "post", "block": "parallel_two_norms"}]
    assert all(_valid_block(row) for row in rows)
    assert covered_pairs(rows) == every_pair(axes, _valid_block)
    # about as few rows as the exhaustive greedy of `pairwise`, far fewer than the product
    assert len(rows) <= len(pairwise(axes, _valid_block)) + 4 and len(rows) * 4 < 3 * 7 * 4 * 3
    assert joint(dict(axes), _valid_block) == (rows, refused)  # the same rows on every run
    for k in range(len(rows)):  # and none is spare to the pair check
        assert covered_pairs(rows[:k] + rows[k + 1 :]) != covered_pairs(rows)


def test_an_axis_with_no_value_a_row_takes_stays_at_its_default():
    """A value that only pairs with one value of another axis (RoPE's scaling with RoPE): the
    rows without that value leave the axis unset (None), and the pairs with the others are refused."""
    axes = {"position": ["learned", "rope"], "scaling": ["linear", "yarn"], "norm": ["pre", "post"]}

    def valid(row):
        return row.get("scaling") is None or row.get("position") in (None, "rope")

    rows, refused = joint(axes, valid)
    assert refused == [{"position": "learned", "scaling": "linear"}, {"position": "learned", "scaling": "yarn"}]
    assert all(valid(row) for row in rows)
    assert any(row["position"] == "learned" and row["scaling"] is None for row in rows)
    held = covered_pairs(rows)
    assert {("scaling", "yarn", "norm", "post"), ("position", "rope", "scaling", "linear")} <= held


def test_a_joint_design_of_every_model_axis_unconstrained_is_49_rows_of_658_million_cells():
    from zoo.config.facts.axes import AXES

    axes = {a.key: [k.value for k in a.kinds] for a in AXES if a.model_level}
    assert math.prod(len(v) for v in axes.values()) > 6 * 10**8
    rows, refused = joint(axes, lambda row: True)
    assert refused == [] and len(rows) == 49  # 7 positions x 7 activations: the least any design can have
    assert covered_pairs(rows) == {
        (a, va, b, vb) for a, b in itertools.combinations(axes, 2) for va in axes[a] for vb in axes[b]
    }


def test_what_cannot_make_a_joint_design_is_refused():
    with pytest.raises(ValueError, match="two axes or more"):
        joint({"a": [1, 2]}, lambda row: True)
    with pytest.raises(ValueError, match="two axes or more"):
        joint({"a": [1, 2], "b": []}, lambda row: True)


def test_each_once_puts_every_value_in_a_row_in_as_many_rows_as_the_largest_axis():
    axes = model_axes("position", "norm", "block", "activation")
    rows, refused = each_once(axes, _valid_block)
    assert refused == [] and all(_valid_block(row) for row in rows)
    assert {(a, row[a]) for row in rows for a in axes} >= {(a, v) for a, values in axes.items() for v in values}
    assert len(rows) == 7  # 7 positions, 7 activations: the placements and blocks fit beside them
    assert not any(row["norm"] == "post" and row["block"] == "parallel_two_norms" for row in rows)


def test_each_once_returns_a_value_refused_alone_and_leaves_an_axis_at_its_default():
    axes = {"position": ["learned", "rope"], "scaling": ["linear", "yarn", "broken"]}

    def valid(row):
        return row.get("scaling") != "broken" and (row.get("scaling") is None or row.get("position") in (None, "rope"))

    rows, refused = each_once(axes, valid)
    assert refused == [("scaling", "broken")]
    assert rows == [
        {"position": "learned", "scaling": None},
        {"position": "rope", "scaling": "linear"},
        {"position": None, "scaling": "yarn"},
    ]
