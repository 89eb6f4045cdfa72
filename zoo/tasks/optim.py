"""Optimizers with parameter groups, and learning-rate schedules as step -> multiplier."""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from zoo.config.train import OptimConfig, OptimizerImpl, OptimizerKind, ScheduleKind, SchedulerConfig
from zoo.config.validate import check_schedule_length


def parameter_groups(
    module: nn.Module, weight_decay: float, output_embedding: nn.Parameter | None = None
) -> list[dict]:
    """Weight decay on the matrices of linear layers only: never on norms, biases or
    embedding tables (token, position and relative-bias tables, and the output projection
    `output_embedding`, an output embedding whether tied or not). Every parameter of `module`
    (a model, or a task with heads of its own) lands in exactly one group."""
    head = output_embedding if output_embedding is not None else getattr(
        getattr(module, "lm_head", None), "weight", None
    )
    decay, no_decay, seen = [], [], set()
    for sub in module.modules():
        for name, param in sub.named_parameters(recurse=False):
            if id(param) in seen or not param.requires_grad:
                continue
            seen.add(id(param))
            if isinstance(sub, nn.Linear) and name == "weight" and param is not head:
                decay.append(param)
            else:
                no_decay.append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def build_optimizer(
    module: nn.Module, cfg: OptimConfig, output_embedding: nn.Parameter | None = None
) -> torch.optim.Optimizer:
    groups = parameter_groups(module, cfg.weight_decay, output_embedding)
    kwargs = dict(lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps)
    on_cuda = all(p.device.type == "cuda" for group in groups for p in group["params"])
    if cfg.implementation == OptimizerImpl.fused or (cfg.implementation == OptimizerImpl.auto and on_cuda):
        kwargs["fused"] = True  # one kernel per group: the update costs a few launches, not hundreds
    elif cfg.implementation != OptimizerImpl.auto:
        kwargs["foreach"] = cfg.implementation == OptimizerImpl.foreach
    if cfg.kind == OptimizerKind.adamw:
        return torch.optim.AdamW(groups, **kwargs)
    if cfg.kind == OptimizerKind.adam:
        return torch.optim.Adam(groups, **kwargs)
    raise ValueError(f"unknown optimizer {cfg.kind}")


def schedule(cfg: SchedulerConfig, *, total_steps: int | None, d_model: int) -> Callable[[int], float]:
    """The multiplier of the base learning rate at optimizer step `step` (0-based)."""
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
