"""A checkpoint's config against the weights it holds, compared before the model is built.

The model a checkpoint rebuilds is sized by its `hyper_parameters` alone; its weights are loaded
after. A config that names far more parameters than the file holds (model.d_model=2^20 beside a
small model's weights) would allocate terabytes, or fail deep inside torch, before the weights
are ever compared. The parameters a config describes are counted without torch
(`zoo.config.schema.params.parameter_parts`, a lower bound of the whole model) and compared with
the numbers the state dict holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from zoo.config.errors import CheckpointError
from zoo.config.schema.convert import as_model_config
from zoo.config.schema.params import parameter_parts

# slack for what an older checkpoint lacks and `upgrade_state_dict` adds (a few norms or biases)
_SLACK = 2**20


def held_numbers(state_dict: Any) -> int:
    """The numbers held by the tensors of a state dict."""
    if not isinstance(state_dict, dict):
        return 0
    return sum(t.numel() for t in state_dict.values() if isinstance(t, torch.Tensor))


def check_config_fits_weights(path: str | Path, model: dict, state_dict: Any) -> None:
    """Refuse, on one line naming the key that makes it large, a checkpoint whose model config
    describes more parameters than its weights hold."""
    parts = parameter_parts(as_model_config(model))
    described, held = sum(parts.values()), held_numbers(state_dict)
    if described <= 2 * held + _SLACK:
        return
    key = max(parts, key=parts.get)
    raise CheckpointError(
        f"checkpoint {path}: its config describes a model of {described:,} parameters (most from "
        f"{key}: {parts[key]:,}) but it holds {held:,} weights; its config is not its weights' "
        f"(the model is not built)"
    )
