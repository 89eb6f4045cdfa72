"""A resume continues the run its checkpoint holds, or it is refused.

The command's model, task, optimizer, schedule, data and tokenizer are compared with what the
checkpoint was trained with; any difference that changes the result is refused on one line
naming the keys (rerunning a directory with another config would otherwise train the old
weights on under a record that describes the new config). What may change on resume:
everything under `trainer.*` (`max_steps` to continue a finished run, devices, validation
cadence), and the keys below, which change how a step is computed, not what it computes."""

from __future__ import annotations

from typing import Any

from zoo.config.errors import ConfigError
from zoo.config.records.checkpoint_extras import CheckpointExtras
from zoo.config.schema.model import model_defaults
from zoo.config.schema.task import task_defaults
from zoo.config.schema.train import optim_defaults, scheduler_defaults


class ResumeMismatch(ConfigError):
    """The command does not describe the run in its directory: refused, and that run's files
    (failed.json included) are left as they are."""


# section -> keys that may differ between the checkpoint and the resuming command
MAY_CHANGE = {
    "model": {"checkpoint_activations"},
    "task": {"compile", "output_loss", "loss_chunk", "tf32"},
    "optim": {"implementation"},
    "data": {"num_workers", "max_device_batch_size", "allow_changed_files"},
}


def _flat(prefix: str, value: Any, out: dict) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flat(f"{prefix}.{key}", item, out)
    else:
        out[prefix] = value


def differences(saved: dict, command: dict) -> list[tuple[str, Any, Any]]:
    """[(key, checkpoint's value, command's value)] over the sections both have."""
    diffs = []
    for section, mine in command.items():
        if section not in saved:
            continue  # a checkpoint of an earlier version without this section
        a, b = {}, {}
        _flat(section, saved[section], a)
        _flat(section, mine, b)
        allowed = {f"{section}.{k}" for k in MAY_CHANGE.get(section, ())}
        for key in sorted(set(a) | set(b)):
            if key.split(".")[0] + "." + key.split(".")[1] in allowed:
                continue
            if a.get(key) != b.get(key):
                diffs.append((key, a.get(key, "(unset)"), b.get(key, "(unset)")))
    return diffs


def check_resume(hparams: dict, command: dict, where: str) -> None:
    """Refuse on one line when `command` (sections of plain data) differs from `hparams`."""
    diffs = differences(hparams, command)
    if not diffs:
        return
    shown = ", ".join(f"{key}={theirs!r} in the checkpoint, {mine!r} here" for key, theirs, mine in diffs[:3])
    more = f" (and {len(diffs) - 3} more)" if len(diffs) > 3 else ""
    fix = " ".join(f"{key}={_override(theirs)}" for key, theirs, _ in diffs if theirs != "(unset)")
    add = f" (add {fix})" if fix and len(diffs) <= 3 else ""
    raise ResumeMismatch(
        f"{where} was trained with another config: {shown}{more}; resume with the checkpoint's values"
        f"{add} (see its run's config.yaml), or start a new run in another hydra.run.dir"
    )


def _override(value) -> str:
    """A value as a command-line override writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_override(v) for v in value) + "]"
    return str(value)


def saved_sections(hparams: dict) -> dict:
    """The checkpoint's config sections in the form `command_sections` gives."""
    raw = hparams.get("extra") or {}
    extras = CheckpointExtras.read(raw)
    out = {k: hparams[k] for k in ("model", "task", "optim", "scheduler") if k in hparams}
    if "model" in out:  # model keys added since the checkpoint was written: the defaults it ran with
        out["model"] = {**model_defaults(), **out["model"]}
    for section, defaults in (("optim", optim_defaults), ("scheduler", scheduler_defaults), ("task", task_defaults)):
        if section in out:  # e.g. Muon's and WSD's keys, task.moe_*, which an earlier run ran without
            out[section] = {**defaults(), **out[section]}
    if extras.data is not None:
        out["data"] = extras.data
    if "tokenizer_kind" in raw:
        out["tokenizer"] = {"kind": extras.tokenizer_kind}
    return out


COMPARED = ("model", "task", "optim", "scheduler", "data", "tokenizer")


def followers_of_max_steps(cfg) -> dict[str, Any]:
    """The keys a resume compares whose value follows trainer.max_steps in `cfg` (a composed
    config, its interpolations unresolved: e.g. -cn quick's `scheduler.warmup_steps:
    ${zoo.share_of_steps:0.1}`) -> their value now. A longer run must keep these values to
    continue its checkpoint, so the message that says how to train on names them. Found by
    resolving the config again with twice the steps; {} where it cannot be resolved."""
    from omegaconf import OmegaConf, open_dict

    try:
        steps = int(OmegaConf.select(cfg, "trainer.max_steps"))
        longer = cfg.copy()
        with open_dict(longer):
            longer.trainer.max_steps = 2 * max(steps, 1)
        now, later = {}, {}
        for section in COMPARED:
            if section in cfg:
                _flat(section, OmegaConf.to_container(cfg[section], resolve=True), now)
                _flat(section, OmegaConf.to_container(longer[section], resolve=True), later)
    except Exception:  # noqa: BLE001 - a value resolved only at run time: nothing to name
        return {}
    return {
        key: value
        for key, value in now.items()
        if later.get(key) != value and key.split(".")[1] not in MAY_CHANGE.get(key.split(".")[0], ())
    }


def to_train_on(cfg, step: int) -> str:
    """What a finished run needs to train on: a larger trainer.max_steps, and every key that
    follows it kept at the run's value, as overrides (e.g. `trainer.max_steps=200
    scheduler.warmup_steps=10`)."""
    pinned = " ".join(f"{key}={_override(value)}" for key, value in followers_of_max_steps(cfg).items())
    longer = f"trainer.max_steps={2 * max(step, 1)}"
    if not pinned:
        return f"raise trainer.max_steps to train on, e.g. {longer}"
    return (
        f"to train on, raise trainer.max_steps and keep the run's value of each key that follows it: "
        f"e.g. {longer} {pinned}"
    )
