"""Batch-size warmup and sequence-length warmup: the stated points of each ramp, what the data
pipeline serves at an optimizer step, and the one-line refusals (torch-free).

`data.batch_warmup` is a list of `[step, global batch]` points: from each point's step on, an
optimizer step takes that many examples (over all ranks); the first point is at step 0, the
steps and the batches rise strictly, and the last batch is `data.global_batch_size`, the batch
of the rest of the run. This is Megatron-LM's `--rampup-batch-size` written out as stages
(Megatron states its ramp in samples; a stage here starts at a step). The loader changes the
micro-batch, never the gradient accumulation: the accumulation derives from the full batch
(and `data.max_device_batch_size`), so every batch of the ramp must split into
accumulation x ranks equal micro-batches.

`data.seq_len_warmup` is a list of `[step, context]` points (Li et al. 2022, "The
Stability-Efficiency Dilemma"): from each point's step on, the model trains on sequences of
that many tokens; the first point is at step 0, the steps and the contexts rise strictly, each
context divides `data.seq_len`, and the last point is `data.seq_len` itself. The windows of the
packed stream are the same; each window of `data.seq_len` tokens is cut into `seq_len /
context` rows (DeepSpeed's "seqlen_reshape"), so a step trains on the same tokens, the same
number of them, and `tokens_seen` is unchanged by the ramp.

`data.batch_warmup_lr` states what the learning rate does during a batch ramp: `constant`
(the schedule's rate per optimizer step, whatever the batch), `linear` (times batch / full
batch, Goyal et al. 2017) or `sqrt` (times its square root, Malladi et al. 2022's rule for
Adam)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError


class BatchWarmupLR(Choice):
    """What the learning rate does while the batch ramps (the multiplier of the schedule's rate
    at a step whose global batch is b, full batch B)."""

    constant = "constant"  # 1
    linear = "linear"  # b / B (Goyal et al. 2017)
    sqrt = "sqrt"  # (b / B) ** 0.5 (Malladi et al. 2022, for Adam)


Points = tuple[tuple[int, int], ...]


def parse_points(key: str, value: Any) -> Points | None:
    """None (no ramp) or `[[step, value], ...]` (lists, tuples or OmegaConf ListConfigs) as a
    tuple of int pairs; ConfigError for anything else, or steps / values that do not rise
    strictly from step 0."""
    if value is None:
        return None
    try:
        pairs = [tuple(point) for point in value]
    except TypeError:
        raise ConfigError(f"{key} must be a list of [step, value] points, got {value!r}") from None
    if not pairs:
        raise ConfigError(f"{key} must be a non-empty list of [step, value] points (or null: no ramp)")
    for point in pairs:
        if len(point) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in point):
            raise ConfigError(f"{key}: each point is [step, value], two integers; got {list(point)!r}")
    points: Points = tuple((int(s), int(v)) for s, v in pairs)
    if points[0][0] != 0:
        raise ConfigError(f"{key} must start at step 0, got a first point at step {points[0][0]}")
    for (s0, v0), (s1, v1) in zip(points, points[1:], strict=False):
        if s1 <= s0 or v1 <= v0:
            raise ConfigError(f"{key} must rise strictly in step and value: [{s0}, {v0}] then [{s1}, {v1}]")
    if points[0][1] < 1:
        raise ConfigError(f"{key}: values must be >= 1, got {points[0][1]}")
    return points


def value_at(points: Points, step: int) -> int:
    """The value of the last point whose step is at or before `step`."""
    found = points[0][1]
    for start, value in points:
        if start > step:
            break
        found = value
    return found


def check_ramps(data: Any) -> None:
    """The cross-field checks of a `DataConfig` with ramps: ConfigError on one line."""
    batch, seq = data.batch_warmup, data.seq_len_warmup
    if batch is not None and batch[-1][1] != data.global_batch_size:
        raise ConfigError(
            f"data.batch_warmup must end at data.global_batch_size={data.global_batch_size}, "
            f"its last point is {list(batch[-1])}"
        )
    if batch is None and data.batch_warmup_lr != BatchWarmupLR.constant:
        raise ConfigError(f"data.batch_warmup_lr={data.batch_warmup_lr.value} needs a data.batch_warmup ramp")
    if seq is not None:
        if seq[-1][1] != data.seq_len:
            raise ConfigError(
                f"data.seq_len_warmup must end at data.seq_len={data.seq_len}, its last point is {list(seq[-1])}"
            )
        for step, context in seq:
            if data.seq_len % context:
                raise ConfigError(
                    f"data.seq_len_warmup: the context {context} at step {step} does not divide "
                    f"data.seq_len={data.seq_len} (each window is cut into equal rows)"
                )
    if (batch is not None or seq is not None) and data.streaming:
        raise ConfigError("data.batch_warmup / data.seq_len_warmup read prepared data, not data.streaming=true")


def check_ramp_task(data: Any, task: str, collate_causal: bool) -> None:
    """Ramps cut and join packed causal windows: ConfigError for another task."""
    if not collate_causal and (data.batch_warmup is not None or data.seq_len_warmup is not None):
        raise ConfigError(f"data.batch_warmup / data.seq_len_warmup apply to task=causal_lm, not task={task}")


def micro_batches(points: Points, world_size: int, accumulation: int) -> Points:
    """`[step, per-rank micro-batch]` of a batch ramp; ConfigError when a batch does not split
    into accumulation x ranks equal micro-batches."""
    parts = world_size * accumulation
    for step, batch in points:
        if batch % parts:
            raise ConfigError(
                f"data.batch_warmup: the batch {batch} at step {step} does not split into "
                f"{accumulation} micro-batch(es) x {world_size} rank(s); make every batch a multiple of {parts}"
            )
    return tuple((step, batch // parts) for step, batch in points)


def lr_multiplier(points: Points | None, rule: BatchWarmupLR, step: int) -> float:
    """The factor on the schedule's learning rate at optimizer `step` under `rule`."""
    if points is None or rule == BatchWarmupLR.constant:
        return 1.0
    share = value_at(points, step) / points[-1][1]
    return share if rule == BatchWarmupLR.linear else share**0.5


def ramped_lr(lr_lambda: Callable[[int], float], data: dict | None) -> Callable[[int], float]:
    """The schedule's multiplier `lr_lambda`, times `lr_multiplier` under the run's data
    section (`data.batch_warmup`, `data.batch_warmup_lr`); `lr_lambda` itself without a ramp
    or under the constant rule. A plain function, so LambdaLR saves none of it."""
    points = parse_points("data.batch_warmup", (data or {}).get("batch_warmup"))
    rule = BatchWarmupLR.parse((data or {}).get("batch_warmup_lr", "constant"), "data.batch_warmup_lr")
    if points is None or rule == BatchWarmupLR.constant:
        return lr_lambda

    def ramped(step: int) -> float:
        return lr_lambda(step) * lr_multiplier(points, rule, step)

    return ramped
