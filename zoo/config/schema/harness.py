"""The numbers zoo hands to lm-evaluation-harness (zoo-eval's `limit=`, `num_fewshot=`;
`callbacks.downstream_limit`), checked before the harness sees them: it turns a limit into a
count with `int()` (an infinite one ends in OverflowError, 2.5 silently becomes 2) and draws
few-shot examples with `random.sample`. No torch, no harness import."""

from __future__ import annotations

import math

from zoo.config.errors import ConfigError


def check_limit(key: str, value: float | None) -> None:
    """`value`: examples per task (a whole number, 1 or more) or a fraction of each (above 0,
    below 1); None: every example."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(
            f"{key} must be a number of examples per task (1 or more) or a fraction of each "
            f"(between 0 and 1), got {value}"
        )
    if value >= 1 and value != int(value):
        raise ConfigError(f"{key}={value}: give a whole number of examples per task, or a fraction of each below 1")


def check_num_fewshot(key: str, value: int | None) -> None:
    """`value`: examples shown before each question, 0 or more; None: each task's own."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{key} must be 0 or more examples shown before each question, got {value}")
