"""Optimizers with parameter groups, and learning-rate schedules as step -> multiplier: one
builder per row of `zoo.config.facts.optimizers` (`OPTIMIZERS`) and of
`zoo.config.facts.schedules` (`SCHEDULES`), keyed by the same enums."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from zoo.config.facts.muon import muon_width_scales
from zoo.config.facts.schedules import SCHEDULE_FACTS, wsd_decay_steps
from zoo.config.schema.train import DecayShape, OptimConfig, OptimizerImpl, OptimizerKind, ScheduleKind, SchedulerConfig
from zoo.config.schema.validate import check_schedule_length
from zoo.tasks.muon import MuonWithAdamW, hidden_matrices


def parameter_groups(
    module: nn.Module,
    weight_decay: float,
    output_embedding: torch.Tensor | None = None,
    scales: dict[int, tuple[float, float]] | None = None,
) -> list[dict]:
    """Weight decay on the matrices of linear layers only: never on norms, biases or
    embedding tables (token, position and relative-bias tables, and the output projection
    `output_embedding`, an output embedding whether tied or not). Every parameter of `module`
    (a model, or a task with heads of its own) lands in exactly one group.

    `scales`: {id(parameter): (learning-rate multiplier, weight-decay multiplier)} (μP's hidden
    matrices: `zoo.models.parametrization.optimizer_scales`); those parameters get groups of
    their own after the two, with `lr_scale` (`build_optimizer` turns it into the group's lr).
    Empty groups are left out."""
    head = (
        output_embedding if output_embedding is not None else getattr(getattr(module, "lm_head", None), "weight", None)
    )
    scales = scales or {}
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    seen: set[int] = set()
    scaled: dict[tuple[bool, float, float], list] = {}
    for sub in module.modules():
        for name, param in sub.named_parameters(recurse=False):
            if id(param) in seen or not param.requires_grad:
                continue
            seen.add(id(param))
            decays = (isinstance(sub, nn.Linear) and name == "weight" and param is not head) or name in getattr(
                sub, "decayed_matrices", ()
            )  # stacked matrices (zoo.nn.moe.Experts)
            if id(param) in scales:
                scaled.setdefault((decays, *scales[id(param)]), []).append(param)
            else:
                (decay if decays else no_decay).append(param)
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    for (decays, lr_scale, decay_scale), params in scaled.items():
        groups.append(
            {"params": params, "weight_decay": weight_decay * decay_scale if decays else 0.0, "lr_scale": lr_scale}
        )
    return [group for group in groups if group["params"]]  # μP's take every matrix of a decoder


def _adam_kwargs(cfg: OptimConfig, groups: list[dict], clips_in_mixed_precision: bool) -> dict:
    """Adam's rate, betas, eps and kernel: `implementation=auto` is fused on CUDA, except where
    Lightning clips gradients in mixed precision (it refuses a fused optimizer there), so foreach."""
    kwargs = dict(lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps)
    on_cuda = all(p.device.type == "cuda" for group in groups for p in group["params"])
    if cfg.implementation == OptimizerImpl.fused or (
        cfg.implementation == OptimizerImpl.auto and on_cuda and not clips_in_mixed_precision
    ):
        kwargs["fused"] = True  # one kernel per group: the update costs a few launches, not hundreds
    elif cfg.implementation == OptimizerImpl.auto and on_cuda:
        kwargs["foreach"] = True  # multi-tensor: the next fewest launches
    elif cfg.implementation != OptimizerImpl.auto:
        kwargs["foreach"] = cfg.implementation == OptimizerImpl.foreach
    return kwargs


def _adamw(module, cfg, groups, clips, output_embedding, scales) -> torch.optim.Optimizer:
    return torch.optim.AdamW(groups, **_adam_kwargs(cfg, groups, clips))


def _adam(module, cfg, groups, clips, output_embedding, scales) -> torch.optim.Optimizer:
    return torch.optim.Adam(groups, **_adam_kwargs(cfg, groups, clips))


def _muon(module, cfg, groups, clips, output_embedding, scales) -> torch.optim.Optimizer:
    """The hidden matrices (`hidden_matrices`) leave their groups for Muon, at optim.muon_lr
    (null: optim.lr) scaled by shape as optim.adjust_lr_fn says, with optim.weight_decay; under
    μP (`scales`: μP's AdamW multipliers (1/m, m)) at Muon's own width rule instead
    (`muon_width_scales`: the spectral rule). The rest stays with AdamW as optim=adamw would
    train it, μP's multipliers included."""
    hidden = hidden_matrices(module, output_embedding)
    scales = scales or {}
    by_scale: dict[tuple[float, float], list] = {}
    for group in groups:
        for p in group["params"]:
            if id(p) in hidden:
                width = muon_width_scales(cfg.adjust_lr_fn.value, scales[id(p)][1]) if id(p) in scales else (1.0, 1.0)
                by_scale.setdefault(width, []).append(p)
    adamw_groups = []
    for group in groups:
        rest = [p for p in group["params"] if id(p) not in hidden]
        if rest:
            adamw_groups.append({**group, "params": rest})
    base = cfg.muon_lr or cfg.lr
    muon_groups = [
        {"params": params}
        if width == (1.0, 1.0)
        else {"params": params, "lr": base * width[0], "weight_decay": cfg.weight_decay * width[1]}
        for width, params in by_scale.items()
    ] or [{"params": []}]
    muon = dict(
        lr=base,
        weight_decay=cfg.weight_decay,
        momentum=cfg.momentum,
        nesterov=cfg.nesterov,
        ns_steps=cfg.ns_steps,
        adjust_lr_fn=cfg.adjust_lr_fn.value,
        muon_variant=cfg.muon_variant.value,
        ns_method=cfg.ns_method.value,
        ns_precision=cfg.ns_precision.value,
        normuon_beta2=cfg.normuon_beta2,
    )
    return MuonWithAdamW(muon_groups, adamw_groups, muon=muon, adamw=_adam_kwargs(cfg, adamw_groups, clips))


# one builder per row of zoo.config.facts.optimizers (tests/config/facts/test_optimizer_table.py)
OPTIMIZERS: dict[OptimizerKind, Callable[..., torch.optim.Optimizer]] = {
    OptimizerKind.adamw: _adamw,
    OptimizerKind.adam: _adam,
    OptimizerKind.muon: _muon,
}


def build_optimizer(
    module: nn.Module,
    cfg: OptimConfig,
    output_embedding: torch.Tensor | None = None,
    scales: dict[int, tuple[float, float]] | None = None,
    clips_in_mixed_precision: bool = False,
) -> torch.optim.Optimizer:
    """optim.kind's optimizer (`OPTIMIZERS`) over `parameter_groups`; a group with an `lr_scale`
    learns at optim.lr x lr_scale (the schedule multiplies each group's own initial rate, so the
    ratio holds)."""
    groups = parameter_groups(module, cfg.weight_decay, output_embedding, scales)
    for group in groups:
        if "lr_scale" in group:
            group["lr"] = cfg.lr * group.pop("lr_scale")
    return OPTIMIZERS[cfg.kind](module, cfg, groups, clips_in_mixed_precision, output_embedding, scales)


def _ramp(warmup: int, step: int) -> float:
    """The linear warmup: (step + 1) / warmup over the first `warmup` steps."""
    return (step + 1) / warmup


def _constant(cfg: SchedulerConfig, total: int | None, d_model: int) -> Callable[[int], float]:
    warmup = cfg.warmup_steps
    return lambda step: min(1.0, _ramp(warmup, step)) if warmup else 1.0


def _inverse_sqrt(cfg: SchedulerConfig, total: int | None, d_model: int) -> Callable[[int], float]:
    # Vaswani et al. 2017, eq. (3): d_model^-0.5 · min(n^-0.5, n · warmup^-1.5), n = step + 1
    warmup = cfg.warmup_steps
    return lambda step: d_model**-0.5 * min((step + 1) ** -0.5, (step + 1) * warmup**-1.5)


def _cosine(cfg: SchedulerConfig, total: int | None, d_model: int) -> Callable[[int], float]:
    assert total is not None  # a row that needs_total: schedule() checked its length
    warmup, floor = cfg.warmup_steps, cfg.min_lr_ratio

    def cosine(step: int) -> float:
        if step < warmup:
            return _ramp(warmup, step)
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    return cosine


def _wsd(cfg: SchedulerConfig, total: int | None, d_model: int) -> Callable[[int], float]:
    """Warmup, 1.0 held, then the cooldown over the last `decay` steps before `total`: at its
    first step (total - decay) the multiplier is still 1, then it falls as 1 - p (linear) or
    1 - sqrt(p) (one_minus_sqrt) to min_lr_ratio, p = (step - start) / decay. The cooldown depends only
    on where it starts and how long it is, so one branched from a stable run's checkpoint at
    its start is the one a run configured to decay there would take."""
    assert total is not None  # a row that needs_total: schedule() checked its length
    warmup, floor = cfg.warmup_steps, cfg.min_lr_ratio
    decay = wsd_decay_steps(total, cfg.decay_steps, cfg.decay_fraction)
    start = total - decay
    shape = (lambda p: 1 - p) if cfg.decay_shape == DecayShape.linear else (lambda p: 1 - math.sqrt(p))

    def wsd(step: int) -> float:
        if step < warmup:
            return _ramp(warmup, step)
        if decay == 0 or step < start:
            return 1.0
        return floor + (1 - floor) * shape(min(1.0, (step - start) / decay))

    return wsd


def _linear(cfg: SchedulerConfig, total: int | None, d_model: int) -> Callable[[int], float]:
    """Warmup, then 1 - (step - warmup) / (total - warmup): zero at `total` (Bergsma et al. 2025)."""
    assert total is not None  # a row that needs_total: schedule() checked its length
    warmup = cfg.warmup_steps

    def linear(step: int) -> float:
        if step < warmup:
            return _ramp(warmup, step)
        return max(0.0, 1 - (step - warmup) / (total - warmup))

    return linear


# one multiplier per row of zoo.config.facts.schedules (tests/config/facts/test_schedule_table.py);
# each returns a plain function (not an object), so LambdaLR saves none of its state in a
# checkpoint and a resumed run (or a branch) takes its schedule from its own config
SCHEDULES: dict[ScheduleKind, Callable[[SchedulerConfig, int | None, int], Callable[[int], float]]] = {
    ScheduleKind.constant: _constant,
    ScheduleKind.cosine: _cosine,
    ScheduleKind.inverse_sqrt: _inverse_sqrt,
    ScheduleKind.wsd: _wsd,
    ScheduleKind.linear: _linear,
}


def schedule(cfg: SchedulerConfig, *, total_steps: int | None, d_model: int) -> Callable[[int], float]:
    """The multiplier of the base learning rate at optimizer step `step` (0-based); `d_model`
    is the width inverse_sqrt reads (`ModelConfig.base_d_model`: under mup the base width);
    a schedule that decays over a total (its row's `needs_total`) ends at scheduler.total_steps,
    else `total_steps` (trainer.max_steps)."""
    check_schedule_length(cfg, total_steps)
    total = (cfg.total_steps or total_steps) if SCHEDULE_FACTS[cfg.kind].needs_total else None
    return SCHEDULES[cfg.kind](cfg, total, d_model)


__all__ = ["OPTIMIZERS", "SCHEDULES", "build_optimizer", "parameter_groups", "schedule"]
