"""Facts about each learning-rate schedule, in one torch-free table: what it is, where it comes
from, the `SchedulerConfig` keys it reads, and whether it needs a total length or a warmup.
`SchedulerConfig` refuses a key the chosen kind does not read from these rows, and the length
checks (`zoo.config.schema.validate.check_schedule_length`) read `needs_total`;
`zoo.tasks.optim.SCHEDULES` builds each kind from a function keyed by the same enum, and
`tests/config/facts/test_schedule_table.py` keeps the two in step."""

from __future__ import annotations

from dataclasses import dataclass

from zoo.config.choice import Choice


class ScheduleKind(Choice):
    constant = "constant"  # optional linear warmup, then flat
    cosine = "cosine"  # linear warmup, cosine decay to min_lr_ratio · lr (Loshchilov & Hutter 2017)
    inverse_sqrt = "inverse_sqrt"  # d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), Vaswani et al.
    wsd = "wsd"  # warmup, stable, decay (Hu et al. 2024, MiniCPM; Hägele et al. 2024)
    linear = "linear"  # linear warmup, linear decay to zero (Bergsma et al. 2025)


class DecayShape(Choice):
    """The shape of a WSD cooldown, from 1 to min_lr_ratio over its steps (progress p in [0, 1])."""

    linear = "linear"  # 1 - p
    one_minus_sqrt = "one_minus_sqrt"  # 1 - sqrt(p) (Hägele et al. 2024, their best cooldown)


@dataclass(frozen=True)
class ScheduleFacts:
    """One schedule's row.

    - `what`, `paper`: what the multiplier of optim.lr does and where it comes from.
    - `params`: the `SchedulerConfig` keys it reads besides `kind`; another kind's key set away
      from its default is refused.
    - `needs_total`: it decays over a total length (scheduler.total_steps, else
      trainer.max_steps), which must outlast the warmup.
    - `needs_warmup`: it divides by the warmup, which must be >= 1 step.
    """

    what: str
    paper: str
    params: tuple[str, ...]
    needs_total: bool = False
    needs_warmup: bool = False


SCHEDULE_FACTS: dict[ScheduleKind, ScheduleFacts] = {
    ScheduleKind.constant: ScheduleFacts(
        what="linear warmup (if any), then optim.lr",
        paper="-",
        params=("warmup_steps",),
    ),
    ScheduleKind.cosine: ScheduleFacts(
        what="linear warmup, then a cosine from optim.lr to min_lr_ratio x optim.lr at total_steps",
        paper="Loshchilov & Hutter 2017 (SGDR), without restarts",
        params=("warmup_steps", "min_lr_ratio", "total_steps"),
        needs_total=True,
    ),
    ScheduleKind.inverse_sqrt: ScheduleFacts(
        what="d_model^-0.5 x min(n^-0.5, n x warmup^-1.5), n = step + 1; optim.lr multiplies it",
        paper="Vaswani et al. 2017, eq. (3)",
        params=("warmup_steps",),
        needs_warmup=True,
    ),
    ScheduleKind.wsd: ScheduleFacts(
        what="linear warmup, optim.lr held, then a cooldown (linear or one_minus_sqrt: 1 - sqrt) to min_lr_ratio x optim.lr "
        "over the last decay_steps (or decay_fraction of total_steps) steps",
        paper="Hu et al. 2024 (MiniCPM); Hägele et al. 2024, 'Scaling Laws and Compute-Optimal Training "
        "Beyond Fixed Training Durations'",
        params=("warmup_steps", "min_lr_ratio", "total_steps", "decay_fraction", "decay_steps", "decay_shape"),
        needs_total=True,
    ),
    ScheduleKind.linear: ScheduleFacts(
        what="linear warmup, then a straight line from optim.lr to zero at total_steps",
        paper="Bergsma et al. 2025, 'Straight to Zero: Why Linearly Decaying the Learning Rate to Zero "
        "Works Best for LLMs'",
        params=("warmup_steps", "total_steps"),
        needs_total=True,
    ),
}


def schedule_readers(param: str) -> tuple[ScheduleKind, ...]:
    """The schedules that read `SchedulerConfig` key `param`."""
    return tuple(kind for kind, facts in SCHEDULE_FACTS.items() if param in facts.params)


def wsd_decay_steps(total: int, decay_steps, decay_fraction: float) -> int:
    """The length of a WSD cooldown: scheduler.decay_steps, else decay_fraction of the total
    steps (rounded to the nearest step). It ends at `total`; 0 is a run that never decays."""
    return int(decay_steps) if decay_steps is not None else int(round(decay_fraction * total))


__all__ = ["DecayShape", "SCHEDULE_FACTS", "ScheduleFacts", "ScheduleKind", "schedule_readers", "wsd_decay_steps"]
