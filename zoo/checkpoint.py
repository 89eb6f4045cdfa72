"""Checkpoints are data: `load_checkpoint` rebuilds the task, its model and its tokenizer from
the file alone, reading it with `torch.load(weights_only=True)` so nothing in the file can run
code."""

from __future__ import annotations

import pickle
import tempfile
from pathlib import Path
from typing import Any

import torch


class CheckpointError(ValueError):
    """A checkpoint path that does not exist, is truncated, or is not a zoo checkpoint."""


def tokenizer_state(tokenizer) -> dict:
    """A tokenizer as plain data: the files its `save` writes, as bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save(tmp)
        return {
            str(p.relative_to(tmp)): p.read_bytes() for p in sorted(Path(tmp).rglob("*")) if p.is_file()
        }


def tokenizer_from_state(state: dict):
    from zoo.data.tokenizers import load_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        for name, data in state.items():
            target = Path(tmp) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return load_tokenizer(tmp)


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unpickling failed"
        raise CheckpointError(
            f"checkpoint {path} holds more than plain data and is refused ({first})"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path} is truncated or not a checkpoint ({exc.__class__.__name__})") from None
    if not isinstance(data, dict) or "hyper_parameters" not in data or "state_dict" not in data:
        raise CheckpointError(f"{path} is not a zoo checkpoint (no hyper_parameters / state_dict)")
    return data


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu"):
    """Rebuild the LightningModule saved at `path` (any zoo task), in eval mode, with its
    tokenizer attached as `.tokenizer` when the checkpoint carries one."""
    from zoo.config.train import TaskConfig
    from zoo.tasks import TASKS

    data = read_checkpoint(path)
    hparams = dict(data["hyper_parameters"])
    kind = TaskConfig(**hparams["task"]).kind
    task = TASKS[kind](**hparams)
    task.load_state_dict(task.upgrade_state_dict(data["state_dict"]))
    if "zoo_tokenizer" in data:
        task.tokenizer = tokenizer_from_state(data["zoo_tokenizer"])
    return task.to(map_location).eval()
