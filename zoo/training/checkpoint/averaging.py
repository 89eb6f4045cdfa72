"""Which weights a tool reads from a run: a checkpoint's raw weights or its average of the weights
(`weights=ema`, what `optim.ema` saved beside them), or the mean of the last k checkpoints of a
run directory (`average=k`: zoo-eval).

The last k checkpoints are, of the run's `checkpoints/` files (last.ckpt and best-STEP.ckpt;
`callbacks.save_top_k=-1` keeps one at every validation), the k of the latest steps, one per
step. They must hold the same model (the same `model` hyperparameters); each floating tensor is
averaged in float32 and cast back to its dtype, and any other (a counter) is the latest's. The
model is rebuilt from the latest one, with its tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from zoo.config.errors import CheckpointError, ConfigError
from zoo.config.facts.ema import EMA_STATE, Weights
from zoo.config.records.rundir import RunDir, locate_checkpoint
from zoo.training.checkpoint.files import load_checkpoint, read_checkpoint


def chosen_weights(path: str | Path, data: dict[str, Any], weights: Weights) -> dict[str, Any]:
    """`data`'s state dict; with weights=ema its parameters replaced by the saved average."""
    state = dict(data["state_dict"])
    if weights == Weights.raw:
        return state
    average = data.get(EMA_STATE)
    if not isinstance(average, dict) or not average:
        raise CheckpointError(
            f"checkpoint {path} holds no average of the weights (its run had no optim.ema); use weights=raw"
        )
    for name in average:
        if name not in state:
            raise CheckpointError(f"checkpoint {path}: its average names {name}, which its weights do not hold")
    # a tied weight (the output head sharing the embedding's) is one parameter under two keys,
    # saved once in storage: the average, kept under the parameter's first name, serves both
    owner = {state[name].data_ptr(): name for name in average if state[name].numel()}
    for key, tensor in state.items():
        shared = isinstance(tensor, torch.Tensor) and tensor.numel() > 0
        name = key if key in average else owner.get(tensor.data_ptr()) if shared else None
        if name is not None:
            state[key] = average[name].to(tensor.dtype)
    return state


def load_weights(
    path: str | Path,
    weights: Weights | str = Weights.raw,
    average: int | None = None,
    *,
    rope_rule: list[str] | None = None,
    tool: str = "zoo",
):
    """The task of checkpoint `path` (as `load_checkpoint` rebuilds it, with RoPE's run-time
    `rope_rule`) holding the chosen weights: its own (weights=raw), its average (weights=ema),
    or with `average=k` the mean of those of the last k checkpoints of the run directory `path`;
    and the checkpoints read."""
    weights = Weights.parse(weights, "weights")
    if average is None:
        ckpt = locate_checkpoint(path)
        task = load_checkpoint(ckpt, rope_rule=rope_rule, tool=tool)
        if weights == Weights.ema:
            state = chosen_weights(ckpt, read_checkpoint(ckpt), weights)
            task.load_state_dict(task.upgrade_state_dict(state))
        return task, [ckpt]
    chosen = last_checkpoints(path, average)
    datas = [read_checkpoint(p) for p in chosen]
    models = [d["hyper_parameters"].get("model") for d in datas]
    for p, model in zip(chosen[1:], models[1:], strict=True):
        if model != models[0]:
            differ = sorted(k for k in set(model) | set(models[0]) if model.get(k) != models[0].get(k))
            raise ConfigError(
                f"average={average}: {chosen[0].name} and {p.name} hold different models "
                f"(model.{', model.'.join(differ[:3])}); average checkpoints of one architecture"
            )
    states = [chosen_weights(p, d, weights) for p, d in zip(chosen, datas, strict=True)]
    task = load_checkpoint(chosen[0], rope_rule=rope_rule, tool=tool)
    task.load_state_dict(task.upgrade_state_dict(mean_state(states)))
    return task, chosen


def mean_state(states: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean of state dicts (the first is the latest): floating tensors averaged in float32."""
    out: dict[str, Any] = {}
    for key, first in states[0].items():
        if isinstance(first, torch.Tensor) and first.is_floating_point():
            total = torch.zeros_like(first, dtype=torch.float32)
            for state in states:
                total += state[key].float()
            out[key] = (total / len(states)).to(first.dtype)
        else:
            out[key] = first
    return out


def last_checkpoints(path: str | Path, k: int) -> list[Path]:
    """The k checkpoints of the latest steps in run directory `path` (or its checkpoints/
    directory), latest first, one per step; fewer than k is refused on one line."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"average must be a whole number of checkpoints >= 1, got {k!r}")
    path = Path(path)
    folder = path if path.name == RunDir.CHECKPOINTS else RunDir(path).checkpoints
    if not path.is_dir() or not folder.is_dir():
        raise ConfigError(
            f"average={k} averages the checkpoints of a run directory; {path} is not one "
            f"(give ckpt=RUN_DIR, the directory with checkpoints/)"
        )
    found = [p for p in folder.iterdir() if p.name == RunDir.LAST or p.match(RunDir.BEST_FILES)]
    by_step: dict[int, Path] = {}
    for p in sorted(found, key=lambda p: p.name != RunDir.LAST):  # last.ckpt first: it wins a tie
        step = int(read_checkpoint(p, weights=False).get("global_step", -1))
        by_step.setdefault(step, p)
    if len(by_step) < k:
        raise ConfigError(
            f"average={k}: {folder} holds checkpoints of {len(by_step)} step(s); train with "
            f"callbacks.save_top_k=-1 to keep one at every validation, or give average={len(by_step)}"
        )
    return [by_step[step] for step in sorted(by_step, reverse=True)[:k]]
