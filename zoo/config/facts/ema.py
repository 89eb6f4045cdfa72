"""Facts about the exponential moving average (EMA) of the weights, torch-free: the `OptimConfig`
keys it reads, the decay rule (with its optional warmup), which weights a validation uses, and
what it refuses, each on one line.

The rule, applied after every `optim.ema_every`-th optimizer step (t counts the updates made so
far, 0 at the first), to every trainable parameter, in float32 whatever the parameter's dtype:

    ema <- d_t * ema + (1 - d_t) * weight,   d_t = optim.ema
    with optim.ema_warmup=true:  d_t = min(optim.ema, (1 + t) / (10 + t))

the warmup of TensorFlow's `ExponentialMovingAverage(num_updates=)` that timm's `ModelEma`
follows: early updates weigh the new weights more, so the average is not held near the
random initialisation for the first ~1/(1 - decay) steps. The average starts as a copy of the
weights when training starts (or of those a checkpoint without an average resumes from).

The average is saved in each checkpoint beside the raw weights (`ema_state_dict`, `ema_updates`)
and resumed from it exactly. Under DDP every rank updates its own copy from the same weights, so
every rank holds the same average. Under sharding (fsdp, hsdp) the average is sharded as its
parameter is: a rank updates its rows only, and a checkpoint holds the average gathered whole
(`zoo.training.ema`), so it resumes on any number of ranks."""

from __future__ import annotations

from typing import Any

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError

# the OptimConfig keys of the average, read by every optimizer kind
EMA_KEYS = ("ema", "ema_every", "ema_warmup", "ema_eval")

# where the average sits in a checkpoint, beside `state_dict` (the raw weights)
EMA_STATE = "ema_state_dict"  # {state_dict key of each trainable parameter: float32 tensor}
EMA_UPDATES = "ema_updates"  # updates made so far (t of the rule)


class EmaEval(Choice):
    """Which weights validation during training measures."""

    raw = "raw"  # the optimizer's weights: val/loss
    ema = "ema"  # the average, swapped in for validation: val/loss is the average's (best.ckpt chosen by it)
    both = "both"  # val/loss of the raw weights, then val_ema/loss (val_ema/ppl, ...) of the average


class Weights(Choice):
    """Which weights zoo-eval, zoo-generate and zoo-export read from a checkpoint."""

    raw = "raw"
    ema = "ema"


def ema_decay(decay: float, updates: int, warmup: bool) -> float:
    """d_t of the rule above for update number `updates` (0 at the first)."""
    if not warmup:
        return decay
    return min(decay, (1.0 + updates) / (10.0 + updates))


def ema_due(step: int, every: int) -> bool:
    """Whether optimizer step `step` (1 after the first step) updates the average."""
    return step % every == 0


def check_ema(optim: Any) -> None:
    """OptimConfig's EMA keys, each refused on one line: the decay in (0, 1) or null, a whole
    `ema_every` >= 1, and no EMA key set away from its default while the average is off."""
    decay = optim.ema
    if decay is not None and (isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0.0 < decay < 1.0):
        raise ConfigError(f"optim.ema must be a decay in (0, 1), e.g. 0.999, or null (off), got {decay!r}")
    every = optim.ema_every
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ConfigError(f"optim.ema_every must be a whole number of optimizer steps >= 1, got {every!r}")
    if decay is None:
        for key, default in (("ema_every", 1), ("ema_warmup", False), ("ema_eval", EmaEval.raw)):
            if getattr(optim, key) != default:
                raise ConfigError(f"optim.{key} applies to the weights' average: set optim.ema=DECAY (e.g. 0.999)")


__all__ = [
    "EMA_KEYS",
    "EMA_STATE",
    "EMA_UPDATES",
    "EmaEval",
    "Weights",
    "check_ema",
    "ema_decay",
    "ema_due",
]
