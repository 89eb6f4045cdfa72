"""Do the data-parallel replicas of a model still hold the same weights?

Every rank reduces each parameter to three float64 numbers (its sum, its sum of squares and
its dot product with a fixed ramp, which tells permuted values apart); rank 0 compares the
gathered fingerprints. Equal fingerprints of every parameter mean equal weights for any
practical purpose, at the cost of one small all-gather instead of moving the weights."""

from __future__ import annotations

import torch


def fingerprint(module: torch.nn.Module) -> torch.Tensor:
    """(P, 3) float64: per parameter, sum, sum of squares, dot with linspace(-1, 1)."""
    rows = []
    for p in module.parameters():
        x = p.detach().double().flatten()
        ramp = torch.linspace(-1.0, 1.0, x.numel(), dtype=torch.float64, device=x.device)
        rows.append(torch.stack([x.sum(), (x * x).sum(), (x * ramp).sum()]))
    return torch.stack(rows)


def replica_agreement(task, trainer) -> dict:
    """{} on one process or when parameters are sharded (FSDP); otherwise
    {"replicas_identical": bool, "replica_max_fingerprint_diff": float}, the same on every
    rank."""
    from lightning.pytorch.strategies import DDPStrategy

    if (
        trainer.world_size < 2
        or not isinstance(trainer.strategy, DDPStrategy)
        or not torch.distributed.is_initialized()
    ):
        return {}
    mine = fingerprint(task.model)
    parts = [torch.empty_like(mine) for _ in range(trainer.world_size)]
    torch.distributed.all_gather(parts, mine)
    gathered = torch.stack(parts)  # (W, P, 3)
    diff = float((gathered - gathered[0]).abs().max())
    return {"replicas_identical": diff == 0.0, "replica_max_fingerprint_diff": diff}
