"""A mistake a user can fix in a comparison is a CompareError (a ZooError) raised where it is
found, so zoo-compare prints it as one line without reading the traceback; anything else is a
bug and keeps its traceback."""

from __future__ import annotations

import pytest

from zoo.compare import compare
from zoo.compare.errors import CompareError
from zoo.compare.report import make_out, pick_baseline
from zoo.compare.verdict import lower_is_better
from zoo.config.errors import ZooError


def test_user_mistakes_are_compare_errors(tmp_path):
    with pytest.raises(CompareError, match="no run directories"):
        compare([tmp_path], tmp_path / "out")
    with pytest.raises(CompareError, match="tune= picks each arm's best value"):
        lower_is_better("val/whatever")
    with pytest.raises(CompareError, match="expected KEY=VALUE"):
        pick_baseline([object()], "no-equals-sign")
    (tmp_path / "file").write_text("x")
    with pytest.raises(CompareError, match="is a file"):
        make_out(tmp_path / "file")
    assert issubclass(CompareError, ZooError) and issubclass(CompareError, ValueError)


def test_the_user_facing_compare_modules_raise_no_plain_value_error():
    """report, tune, scale and select refuse bad input with CompareError only."""
    from pathlib import Path

    import zoo.compare

    root = Path(zoo.compare.__file__).parent
    plain = [
        f"{name}.py"
        for name in ("report", "tune", "scale", "select")
        if "raise ValueError(" in (root / f"{name}.py").read_text()
    ]
    assert not plain, plain
