"""A report's "Held fixed" line read back as the settings it shows (`held_from_line`): what a
report written before comparison.json kept them says of its runs, restored so that the report
rebuilt from its runs.csv says the same line (reports/rebuild.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zoo.compare.design import design_line, held_from_line
from zoo.compare.runs import Run, RunStatus

SHARED = {
    "data.source": "kjv",
    "tokenizer.kind": "byte",
    "tokenizer.vocab_size": 256,  # a byte tokenizer's: not shown
    "data.seq_len": 64,
    "optim.weight_decay": 0.0,
    "model.parametrization": "mup",
    "model.d_model": 48,
    "model.n_kv_heads": None,
    "model.d_ff": None,
    "trainer.max_epochs": 3,  # no design key: not shown
}


def _runs(config: dict, arms: list[dict]) -> list[Run]:
    return [
        Run(
            path=Path(f"sweep/{i * 3 + seed}"),
            overrides=[],
            config={**config, **arm, "seed": seed},
            status=RunStatus.finished,
            summary={"tokenizer": {"vocab_size": 262}},
        )
        for i, arm in enumerate(arms)
        for seed in (0, 1, 2)
    ]


@pytest.mark.parametrize(
    "extra, arms",
    [
        ({"model.ff_mult": 4}, [{"model.norm": "pre"}, {"model.norm": "post"}]),  # d_ff sized by a shared key
        ({}, [{"model.norm": "pre"}, {"model.norm": "post"}]),  # d_ff at its default
        ({}, [{"model.ff_mult": 4}, {"model.ff_mult": 8}]),  # d_ff sized by an arm's key: not shown
    ],
    ids=["ff_mult shared", "d_ff default", "ff_mult varies"],
)
def test_a_held_fixed_line_reads_back_as_the_line_it_was(extra, arms):
    """The settings read from the line, given to runs that hold nothing else but their arm and
    seed, make the same line; each at the value and type it had."""
    line = design_line(_runs({**SHARED, **extra}, arms))
    held = held_from_line(line)
    assert design_line(_runs(held, arms)) == line
    assert held["optim.weight_decay"] == 0.0 and isinstance(held["optim.weight_decay"], float)
    assert held["data.seq_len"] == 64 and held["model.n_kv_heads"] is None
    assert "tokenizer.vocab_size" not in held and "trainer.max_epochs" not in held
    assert list(held) == [k for k in (*SHARED, *extra) if k in held]  # in held_settings' order


def test_a_line_naming_a_key_it_never_shows_is_refused():
    with pytest.raises(ValueError, match="model.norm: not a setting"):
        held_from_line("Held fixed: `data.source=kjv`, `model.norm=pre`. Seeds: 0, 1.")
