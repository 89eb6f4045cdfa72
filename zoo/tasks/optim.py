"""Optimizers with parameter groups, and learning-rate schedules as step -> multiplier."""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from zoo.config.schema.train import OptimConfig, OptimizerImpl, OptimizerKind, ScheduleKind, SchedulerConfig
from zoo.config.schema.validate import check_schedule_length


def parameter_groups(
    module: nn.Module, weight_decay: float, output_embedding: nn.Parameter | None = None,
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
    head = output_embedding if output_embedding is not None else getattr(
        getattr(module, "lm_head", None), "weight", None
    )
    scales = scales or {}
    decay, no_decay, seen = [], [], set()
    scaled: dict[tuple[bool, float, float], list] = {}
    for sub in module.modules():
        for name, param in sub.named_parameters(recurse=False):
            if id(param) in seen or not param.requires_grad:
                continue
            seen.add(id(param))
            decays = isinstance(sub, nn.Linear) and name == "weight" and param is not head
            if id(param) in scales:
                scaled.setdefault((decays, *scales[id(param)]), []).append(param)
            else:
                (decay if decays else no_decay).append(param)
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    for (decays, lr_scale, decay_scale), params in scaled.items():
        groups.append({"params": params, "weight_decay": weight_decay * decay_scale if decays else 0.0,
                       "lr_scale": lr_scale})
    return [group for group in groups if group["params"]]  # μP's take every matrix of a decoder


def build_optimizer(
    module: nn.Module, cfg: OptimConfig, output_embedding: nn.Parameter | None = None,
    scales: dict[int, tuple[float, float]] | None = None, clips_in_mixed_precision: bool = False,
) -> torch.optim.Optimizer:
    """Adam or AdamW over `parameter_groups`; a group with an `lr_scale` learns at optim.lr x
    lr_scale (the schedule multiplies each group's own initial rate, so the ratio holds).
    `implementation=auto` is fused on CUDA, except where Lightning clips gradients in mixed
    precision (`clips_in_mixed_precision`): it refuses a fused optimizer there, so foreach."""
    groups = parameter_groups(module, cfg.weight_decay, output_embedding, scales)
    for group in groups:
        if "lr_scale" in group:
            group["lr"] = cfg.lr * group.pop("lr_scale")
    kwargs = dict(lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps)
    on_cuda = all(p.device.type == "cuda" for group in groups for p in group["params"])
    if cfg.implementation == OptimizerImpl.fused or (cfg.implementation == OptimizerImpl.auto and on_cuda
                                                     and not clips_in_mixed_precision):
        kwargs["fused"] = True  # one kernel per group: the update costs a few launches, not hundreds
    elif cfg.implementation == OptimizerImpl.auto and on_cuda:
        kwargs["foreach"] = True  # multi-tensor: the next fewest launches
    elif cfg.implementation != OptimizerImpl.auto:
        kwargs["foreach"] = cfg.implementation == OptimizerImpl.foreach
    if cfg.kind == OptimizerKind.adamw:
        return torch.optim.AdamW(groups, **kwargs)
    if cfg.kind == OptimizerKind.adam:
        return torch.optim.Adam(groups, **kwargs)
    raise ValueError(f"unknown optimizer {cfg.kind}")


def schedule(cfg: SchedulerConfig, *, total_steps: int | None, d_model: int) -> Callable[[int], float]:
    """The multiplier of the base learning rate at optimizer step `step` (0-based); `d_model`
    is the width inverse_sqrt reads (`ModelConfig.base_d_model`: under mup the base width)."""
    warmup = cfg.warmup_steps

    if cfg.kind == ScheduleKind.constant:
        return lambda step: min(1.0, (step + 1) / warmup) if warmup else 1.0

    if cfg.kind == ScheduleKind.inverse_sqrt:
        # Vaswani et al. 2017, eq. (3): d_model^-0.5 · min(n^-0.5, n · warmup^-1.5), n = step + 1
        return lambda step: d_model ** -0.5 * min((step + 1) ** -0.5, (step + 1) * warmup ** -1.5)

    if cfg.kind == ScheduleKind.cosine:
        check_schedule_length(cfg, total_steps)
        total = cfg.total_steps or total_steps
        floor = cfg.min_lr_ratio

        def cosine(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            progress = min(1.0, (step - warmup) / max(1, total - warmup))
            return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

        return cosine
    raise ValueError(f"unknown schedule {cfg.kind}")


__all__ = ["build_optimizer", "parameter_groups", "schedule"]
