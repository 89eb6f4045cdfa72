"""zoo-compare names an arm that differs by its layer pattern compactly ("gated_deltanet 3:1
full", "GSGF"), never two patterns alike, and keeps the pattern itself in runs.csv, from which
the report is rebuilt with the same names."""

from __future__ import annotations

import csv
import itertools

import pytest
import yaml

from tests.compare.sweeps import write_sweep
from zoo.compare.patterns import INITIALS, arm_setting, pattern_name
from zoo.compare.recompute import recompute
from zoo.compare.report import compare
from zoo.config.facts.attention import AttentionKind

G, S, F = AttentionKind.gated_deltanet, AttentionKind.sliding, AttentionKind.full


@pytest.mark.parametrize(
    "kinds,name",
    [
        ([G, G, G, F], "gated_deltanet 3:1 full"),
        ([G, F], "gated_deltanet 1:1 full"),
        ([G] * 7 + [F], "gated_deltanet 7:1 full"),
        ([S, G], "sliding 1:1 gated_deltanet"),
        ([G], "gated_deltanet"),
        ([G, S, G, F], "GSGF"),
        ([F, G, G, G], "FGGG"),
        ([G, G], "GG"),
        ([G, F, G, F], "GFGF"),  # tiles as [G, F] does, but is another value: another arm
    ],
)
def test_a_pattern_is_named_by_its_ratio_its_kind_or_its_initials(kinds, name):
    assert pattern_name(kinds) == name


def test_two_different_patterns_never_share_a_name():
    """Every pattern of up to six layers over every kind: as many names as patterns, none a
    kind's initials shared with another kind."""
    assert len(set(INITIALS.values())) == len(AttentionKind)
    patterns = [list(p) for n in range(1, 7) for p in itertools.product(list(AttentionKind), repeat=n)]
    names = {pattern_name(p) for p in patterns}
    assert len(names) == len(patterns)


def test_global_every_over_a_recurrent_kind_is_named_as_the_pattern_it_makes():
    """model.global_every=4 over gated_deltanet is the stack [G, G, G, F] makes, and is named
    alike; over sliding attention, unset or not a count it stays as written."""
    recurrent = {"model.attention": "gated_deltanet", "model.global_every": 4}
    assert arm_setting(recurrent, "model.global_every") == "gated_deltanet 3:1 full"
    assert arm_setting({**recurrent, "model.global_every": 2}, "model.global_every") == "gated_deltanet 1:1 full"
    assert arm_setting({**recurrent, "model.global_every": None}, "model.global_every") == "(unset)"
    assert arm_setting({"model.attention": "sliding", "model.global_every": 4}, "model.global_every") == "4"
    assert arm_setting({"model.layer_pattern": ["gated_deltanet", "full"]}, "model.layer_pattern") == (
        "gated_deltanet 1:1 full"
    )
    # runs.csv's text of the list reads back as the list; a kind unknown here leaves it whole
    assert arm_setting({"model.layer_pattern": "['gated_deltanet', 'full']"}, "model.layer_pattern") == (
        "gated_deltanet 1:1 full"
    )
    assert arm_setting({"model.layer_pattern": ["retnet", "full"]}, "model.layer_pattern") == "['retnet', 'full']"


PATTERNS = [
    ["gated_deltanet", "full"],
    ["gated_deltanet", "gated_deltanet", "gated_deltanet", "full"],
    ["gated_deltanet", "sliding", "gated_deltanet", "full"],
    ["gated_deltanet", "full", "gated_deltanet", "full"],
]


def test_a_sweep_over_patterns_names_its_arms_by_pattern_and_keeps_the_lists_in_runs_csv(tmp_path):
    runs = [
        ({"model.layer_pattern": pattern, "model.n_layers": 4, "seed": seed}, 3.0 + i / 10 + seed / 100)
        for i, pattern in enumerate(PATTERNS)
        for seed in range(2)
    ]
    runs += [({"model.attention": "gated_deltanet", "model.global_every": 4, "seed": s}, 3.5) for s in range(2)]
    write_sweep(tmp_path / "sweep", runs)
    out = tmp_path / "out"
    report = compare([tmp_path / "sweep"], out, plots=False, baseline="model.layer_pattern=gated_deltanet 3:1 full")
    shown = [arm.settings["model.layer_pattern"] for arm in report.arms]
    assert shown == ["gated_deltanet 1:1 full", "gated_deltanet 3:1 full", "GSGF", "GFGF", "(unset)"]
    assert report.arms[-1].settings["model.global_every"] == "gated_deltanet 3:1 full"
    assert report.baseline is report.arms[1]  # picked by the name the report shows
    assert "| gated_deltanet 3:1 full |" in (out / "report.md").read_text().replace("`", "").replace("\\_", "_")
    with (out / "runs.csv").open(newline="") as handle:
        kept = [row["model.layer_pattern"] for row in csv.DictReader(handle)]
    assert [yaml.safe_load(cell) for cell in kept[:8:2]] == PATTERNS  # the lists themselves
    lines, equal = recompute(out)  # rebuilt from runs.csv: the same names, the same report
    assert equal, "\n".join(lines)
