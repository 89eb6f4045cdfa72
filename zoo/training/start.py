"""What rank 0 writes into the run directory before training: the resolved config and the
tokenizer (so the directory describes the run even if it never finishes)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from zoo.config.paths import CONFIG_NAME, recipe_groups
from zoo.config.records.atomic import write_text
from zoo.config.records.rundir import RunDir
from zoo.config.schema.flops import mtp_flops
from zoo.config.schema.params import mtp_params
from zoo.config.schema.root import ZooConfig
from zoo.models.summary import summarize
from zoo.training.origin import RunOrigin

log = logging.getLogger("zoo")


def composed_from(origin: RunOrigin) -> str:
    """The recipe (-cn) and the option of every config group the run was composed with (a
    recipe's arms first), those the command line did not name marked as the recipe's or as
    defaults (a model preset picks its task and a task its corpus: `model=t5` trains seq2seq on
    the number phrases, and this line says so); "" for a run composed without a command
    (`RunOrigin()`: no group choices known)."""
    if not origin.choices:
        return ""

    named = {o.lstrip("+~").split("=", 1)[0] for o in origin.overrides}
    groups = ("model", "model/position", "task", "data", "tokenizer", "optim", "scheduler", "trainer")
    choices = origin.choices
    recipe = origin.config_name if origin.config_name != CONFIG_NAME else None
    from_recipe = recipe_groups(recipe) if recipe else set()
    parts = [f"recipe {recipe}"] if recipe else []
    arms = sorted(g for g in choices if str(g).startswith("arm/") and choices.get(g) is not None)
    for group in [*arms, *groups]:
        option = choices.get(group) or choices.get(f"{group}@_global_.{group}")
        if option is None:
            continue
        if group in named:
            parts.append(f"{group}={option}")
        elif group in from_recipe:
            parts.append(f"{group}={option} (recipe)")
        else:
            parts.append(f"{group}={option} (default)")
    return " ".join(parts)


def record_start(composed: Mapping[str, Any], spec: ZooConfig, run_dir: Path, task, trainer, origin: RunOrigin) -> None:
    """Log what the run was composed from (`origin`) and the model's size, write config.yaml
    (`composed`: the config, resolved) and tokenizer/ (rank 0 only)."""
    if not trainer.is_global_zero:
        return
    files = RunDir(run_dir)
    chosen = composed_from(origin)
    if chosen:
        log.info("composed from: %s", chosen)
    log.info("model: %s", summarize(task.model, spec.data.seq_len))
    if spec.task.mtp_depth:  # the multi-token prediction modules beside the model, counted from their row
        depth, seq_len = spec.task.mtp_depth, spec.data.seq_len
        log.info(
            "task.mtp_depth=%d: %s parameters beside the model, forward FLOPs/token %s more at context %d",
            depth,
            f"{mtp_params(spec.model, depth):,}",
            f"{mtp_flops(spec.model, depth, seq_len):,}",
            seq_len,
        )
    write_text(files.config, OmegaConf.to_yaml(dict(composed)))
    task.tokenizer.save(files.tokenizer)
    log.info("run directory: %s", run_dir)
