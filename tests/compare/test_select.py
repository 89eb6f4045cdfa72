"""Choosing each arm's best value without the winner's curse: every seed is measured at the
value chosen on the other seeds (`leave_one_seed_out`). A worked example, the one-seed case,
and a simulation in which every value is equally good: picking the best on the measuring seeds
reads too low, the held-out measurement does not."""

from __future__ import annotations

import random
import statistics

import pytest

from zoo.compare.select import leave_one_seed_out


def test_each_seed_is_measured_at_the_value_the_other_seeds_chose():
    # three learning rates x seeds 0, 1, 2 (lower is better)
    points = [
        {0: 3.0, 1: 3.1, 2: 3.2},  # mean 3.10
        {0: 2.5, 1: 3.4, 2: 2.9},  # mean 2.93: best on all seeds
        {0: 2.8, 1: 2.9, 2: 3.3},
    ]  # mean 3.00
    choice = leave_one_seed_out(points, lower=True)
    assert choice.best == 1 and choice.held_out
    # seed 0 left out: means over seeds 1, 2 are 3.15, 3.15, 3.10 -> value 2, where seed 0 has 2.8
    # seed 1 left out: means over seeds 0, 2 are 3.10, 2.70, 3.05 -> value 1: 3.4
    # seed 2 left out: means over seeds 0, 1 are 3.05, 2.95, 2.85 -> value 2: 3.3
    assert choice.chosen == {0: 2, 1: 1, 2: 2}
    assert choice.finals == {0: 2.8, 1: 3.4, 2: 3.3}
    higher = leave_one_seed_out(points, lower=False)
    assert higher.best == 0


def test_one_seed_chooses_and_measures_and_says_so():
    choice = leave_one_seed_out([{0: 3.0}, {0: 2.0}, {}], lower=True)
    assert choice.best == 1 and not choice.held_out and choice.finals == {0: 2.0}
    assert leave_one_seed_out([{}, {}], lower=True).best is None


def test_a_seed_missing_at_its_chosen_value_is_not_measured():
    points = [{0: 3.0, 1: 3.0}, {1: 2.0}]  # seed 0 never finished at the second value
    choice = leave_one_seed_out(points, lower=True)
    assert 0 not in choice.finals  # seed 1 picks value 1 for seed 0, where seed 0 has no result
    assert choice.finals == {1: 3.0}  # seed 1 left out: only value 0 has another seed


def test_held_out_measurement_has_no_winners_curse():
    """Five values that are all equally good (true loss 3.0, seed noise 0.1), three seeds: the
    best mean on the same seeds reads well below 3.0 (the winner's curse), the held-out
    measurement does not."""
    rng = random.Random(0)
    naive, held = [], []
    for _ in range(400):
        points = [{s: 3.0 + rng.gauss(0, 0.1) for s in range(3)} for _ in range(5)]
        choice = leave_one_seed_out(points, lower=True)
        naive.append(statistics.mean(points[choice.best].values()))
        held.append(statistics.mean(choice.finals.values()))
    assert statistics.mean(naive) < 3.0 - 0.05  # E[min of 5 means of 3] ≈ 3 - 1.16 · 0.1/√3 ≈ 2.933
    assert statistics.mean(held) == pytest.approx(3.0, abs=0.012)  # 400 · 3 draws: se ≈ 0.003
