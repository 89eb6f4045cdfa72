"""Choosing a value of one key per arm without the winner's curse.

Picking each arm's best value (say its learning rate) on the same seeds that then measure the
arm makes the chosen arm look better than it is: the pick favours values whose seeds happened to
run well. `leave_one_seed_out` measures each seed at the value chosen on the *other* seeds, so
no seed both chooses and is measured, and every seed still counts (cross-validation over
seeds). With one seed nothing is held out: the choice and the measurement share it, and
`Choice.held_out` is False.

Failures count: a value at which any run ended without a final result (failed, diverged,
unfinished or damaged: `failed[i]`) is failed for tuning. It is never a candidate, neither for
`best` nor for any seed's held-out pick, so it is never averaged over the seeds that survived it
and no seed is measured at a value where another seed diverged. (The alternative, scoring a
failed run at a worst value, needs a worst value for every metric; this rule needs none.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Choice:
    """The value chosen on every seed (`best`, for display), and each seed's final metric at
    the value chosen without it (`finals`, for the measurement) with that value (`chosen`)."""

    best: int | None  # index into the values; None when no value has a result
    finals: dict[Any, float] = field(default_factory=dict)  # seed -> metric
    chosen: dict[Any, int] = field(default_factory=dict)  # seed -> index of the value it was measured at
    held_out: bool = False  # False: one seed chose and was measured (no hold-out possible)
    failed: list[int] = field(default_factory=list)  # indices of the values failed for tuning
    unmeasured: list[Any] = field(default_factory=list)  # seeds with no run at the value chosen for them


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _pick(candidates: list[tuple[int, float]], lower: bool) -> int | None:
    if not candidates:
        return None
    return (min if lower else max)(candidates, key=lambda c: c[1])[0]


def leave_one_seed_out(points: Sequence[dict[Any, float]], lower: bool, failed: Sequence[bool] | None = None) -> Choice:
    """`points[i]` maps seed -> final metric at the i-th value of the key; `failed[i]` says a
    run at that value ended without a final result (the value is then no candidate). `best` is
    the value with the best mean over all its seeds; each seed s is measured at the value with
    the best mean over the seeds other than s (values with no other seed are not candidates for
    s); a seed with no run at the value chosen for it is named in `unmeasured`."""
    out = [i for i in range(len(points)) if failed is not None and failed[i]]
    points = [{} if i in out else p for i, p in enumerate(points)]
    best = _pick([(i, _mean(list(p.values()))) for i, p in enumerate(points) if p], lower)
    seeds = list(dict.fromkeys(s for p in points for s in p))
    if len(seeds) < 2:
        choice = Choice(best=best, failed=out)
        if best is not None:
            choice.finals = dict(points[best])
            choice.chosen = {s: best for s in points[best]}
        return choice
    choice = Choice(best=best, held_out=True, failed=out)
    for seed in seeds:
        others = [
            (i, _mean([v for s, v in p.items() if s != seed]))
            for i, p in enumerate(points)
            if any(s != seed for s in p)
        ]
        pick = _pick(others, lower)
        if pick is not None and seed in points[pick]:
            choice.finals[seed] = points[pick][seed]
            choice.chosen[seed] = pick
        elif pick is not None:
            choice.unmeasured.append(seed)
    return choice


def chosen_runs(choice: Choice | None, points: Sequence[Any]) -> list[Any]:
    """The runs `choice` measured: each seed's run at the value chosen for it (`points[i].runs`
    holds the runs at the i-th value), in the order of `choice.chosen`."""
    if choice is None:
        return []
    out = []
    for seed, i in choice.chosen.items():
        out += [r for r in points[i].runs if r.seed == seed][:1]
    return out
