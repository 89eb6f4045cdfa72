"""report.md's power section for a plain or tuned report (`zoo.compare.power`): the smallest
difference the design detects and the seeds the largest unresolved difference would need."""

from __future__ import annotations

from typing import Any

from zoo.compare.escape import text
from zoo.compare.power import design
from zoo.compare.stats import Difference


def power_lines(
    others: list[dict[Any, float]], baseline: dict[Any, float], diffs: list[tuple[str, Difference | None]], metric: str
) -> list[str]:
    """The "## Power" section of a report comparing `others` ({seed: final metric} each) with
    `baseline`: the smallest difference the design detects and what the largest unresolved one
    needs; a line saying why when the seeds give no spread."""
    found = design(others, baseline, diffs)
    if found is None:
        return ["", "## Power", "", "No arm has 2 seeds with a spread: the design's power cannot be estimated."]
    return ["", "## Power", "", text(found.sentence(metric))]
