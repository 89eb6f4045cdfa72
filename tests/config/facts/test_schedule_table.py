"""The schedule table (`zoo.config.facts.schedules.SCHEDULE_FACTS`) agrees with the schedules it
describes: every kind has a row, a multiplier and a config file; a key a row reads changes its
multiplier, a key it does not read is refused; and WSD and linear decay take the values worked
out by hand at their phase boundaries."""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path

import pytest

from zoo.config import ConfigError
from zoo.config.facts.schedules import SCHEDULE_FACTS, ScheduleKind, schedule_readers
from zoo.config.schema.train import SchedulerConfig
from zoo.tasks.optim import SCHEDULES, schedule

CONF = Path(__file__).resolve().parents[3] / "conf" / "scheduler"
KINDS = list(ScheduleKind)
KEYS = [f.name for f in fields(SchedulerConfig) if f.name != "kind"]
CHANGED = {
    "warmup_steps": 7,
    "min_lr_ratio": 0.3,
    "total_steps": 60,
    "decay_fraction": 0.5,
    "decay_steps": 12,
    "decay_shape": "one_minus_sqrt",
}
BASE = {"warmup_steps": 4}


def _values(cfg: SchedulerConfig, total: int = 100) -> list[float]:
    f = schedule(cfg, total_steps=total, d_model=64)
    return [f(step) for step in range(total + 5)]


def test_every_kind_has_a_row_a_multiplier_and_a_config_file():
    assert list(SCHEDULE_FACTS) == KINDS
    assert list(SCHEDULES) == KINDS
    assert {p.stem for p in CONF.glob("*.yaml")} >= {k.value for k in KINDS}
    assert set(CHANGED) == set(KEYS) and all(schedule_readers(key) for key in KEYS)


@pytest.mark.parametrize("kind, key", [(k, key) for k in KINDS for key in SCHEDULE_FACTS[k].params], ids=str)
def test_a_key_a_row_reads_changes_its_multiplier(kind, key):
    base = SchedulerConfig(kind=kind, **BASE)
    changed = SchedulerConfig(kind=kind, **{**BASE, key: CHANGED[key]})
    assert _values(base) != _values(changed)


@pytest.mark.parametrize(
    "kind, key", [(k, key) for k in KINDS for key in KEYS if key not in SCHEDULE_FACTS[k].params], ids=str
)
def test_a_key_the_row_does_not_read_is_refused(kind, key):
    with pytest.raises(ConfigError, match=f"scheduler.{key} only applies to scheduler="):
        SchedulerConfig(kind=kind, **{**BASE, key: CHANGED[key]})


def test_an_unknown_kind_is_refused():
    with pytest.raises(ConfigError, match="scheduler.kind='onecycle' is not allowed"):
        SchedulerConfig(kind="onecycle")


def test_wsd_linear_cooldown_at_its_boundaries():
    """warmup 4, total 100, decay_fraction 0.2: the cooldown is steps 80..99, from 1 down by
    (1 - 0.1) / 20 a step to 0.1 at step 100."""
    f = schedule(SchedulerConfig(kind="wsd", warmup_steps=4, min_lr_ratio=0.1), total_steps=100, d_model=8)
    assert [f(s) for s in range(5)] == [0.25, 0.5, 0.75, 1.0, 1.0]
    assert f(79) == 1.0 and f(80) == 1.0  # the last stable step and the cooldown's first
    assert f(81) == pytest.approx(0.1 + 0.9 * (1 - 1 / 20))
    assert f(90) == pytest.approx(0.1 + 0.9 * 0.5)
    assert f(99) == pytest.approx(0.1 + 0.9 / 20)
    assert f(100) == pytest.approx(0.1) and f(1000) == pytest.approx(0.1)


def test_wsd_one_minus_sqrt_cooldown_and_decay_steps():
    """decay_steps=16 of total 100: the cooldown starts at step 84; 1 - sqrt(p) to zero."""
    cfg = SchedulerConfig(kind="wsd", warmup_steps=0, min_lr_ratio=0.0, decay_steps=16, decay_shape="one_minus_sqrt")
    f = schedule(cfg, total_steps=100, d_model=8)
    assert f(0) == 1.0 and f(83) == 1.0 and f(84) == 1.0
    assert f(88) == pytest.approx(1 - math.sqrt(4 / 16)) == pytest.approx(0.5)
    assert f(93) == pytest.approx(1 - math.sqrt(9 / 16)) == pytest.approx(0.25)
    assert f(100) == 0.0


def test_wsd_with_no_cooldown_is_a_stable_run():
    f = schedule(SchedulerConfig(kind="wsd", warmup_steps=2, decay_steps=0), total_steps=50, d_model=8)
    assert [f(s) for s in (0, 1, 2, 49, 50, 10**6)] == [0.5, 1.0, 1.0, 1.0, 1.0, 1.0]


def test_wsd_refuses_a_cooldown_that_begins_inside_the_warmup():
    with pytest.raises(ConfigError, match="cooldown of 30 steps would begin at step 20, before its warmup of 25"):
        schedule(SchedulerConfig(kind="wsd", warmup_steps=25, decay_steps=30), total_steps=50, d_model=8)
    with pytest.raises(ConfigError, match="decay_steps and scheduler.decay_fraction both set"):
        SchedulerConfig(kind="wsd", decay_steps=3, decay_fraction=0.5)


def test_linear_decays_straight_to_zero():
    """warmup 10, total 110: 1 at step 10, then down by 1/100 a step, zero at step 110."""
    f = schedule(SchedulerConfig(kind="linear", warmup_steps=10), total_steps=110, d_model=8)
    assert f(0) == pytest.approx(0.1) and f(9) == 1.0 and f(10) == 1.0
    assert f(11) == pytest.approx(0.99) and f(60) == pytest.approx(0.5) and f(109) == pytest.approx(0.01)
    assert f(110) == 0.0 and f(200) == 0.0
    g = schedule(SchedulerConfig(kind="linear", warmup_steps=0), total_steps=4, d_model=8)
    assert [g(s) for s in range(5)] == [1.0, 0.75, 0.5, 0.25, 0.0]


@pytest.mark.parametrize("kind", [k for k in KINDS if SCHEDULE_FACTS[k].needs_total], ids=str)
def test_a_schedule_that_decays_needs_a_total_past_its_warmup(kind):
    with pytest.raises(ConfigError, match=f"scheduler={kind.value} needs total steps"):
        schedule(SchedulerConfig(kind=kind, warmup_steps=10), total_steps=None, d_model=8)
    with pytest.raises(ConfigError, match=f"scheduler={kind.value} needs total steps"):
        schedule(SchedulerConfig(kind=kind, warmup_steps=10), total_steps=10, d_model=8)
