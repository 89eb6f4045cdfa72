"""A resume continues the run its checkpoint holds, or it is refused.

The command's model, task, optimizer, schedule, data and tokenizer are compared with what the
checkpoint was trained with; any difference that changes the result is refused on one line
naming the keys (rerunning a directory with another config would otherwise train the old
weights on under a record that describes the new config). What may change on resume:
everything under `trainer.*` (`max_steps` to continue a finished run, devices, validation
cadence), and the keys below, which change how a step is computed, not what it computes."""

from __future__ import annotations

from typing import Any

from zoo.config.errors import CheckpointError, ConfigError
from zoo.config.records.hparams import SECTIONS, TrainedConfig, from_hparams, to_hparams
from zoo.config.schema.root import ZooConfig


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


def flatten(prefix: str, value: Any, out: dict) -> None:
    """`value`'s leaves into `out`, under dotted keys that begin with `prefix`."""
    if isinstance(value, dict):
        for key, item in value.items():
            flatten(f"{prefix}.{key}", item, out)
    else:
        out[prefix] = value


def differences(saved: dict, command: dict) -> list[tuple[str, Any, Any]]:
    """[(key, checkpoint's value, command's value)] over the sections both have."""
    diffs = []
    for section, mine in command.items():
        if section not in saved:
            continue  # a checkpoint of an earlier version without this section
        a: dict[str, Any] = {}
        b: dict[str, Any] = {}
        flatten(section, saved[section], a)
        flatten(section, mine, b)
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
    fix = " ".join(f"{key}={as_override(theirs)}" for key, theirs, _ in diffs if theirs != "(unset)")
    add = f" (add {fix})" if fix and len(diffs) <= 3 else ""
    raise ResumeMismatch(
        f"{where} was trained with another config: {shown}{more}; resume with the checkpoint's values"
        f"{add} (see its run's config.yaml), or start a new run in another hydra.run.dir"
    )


def as_override(value: Any) -> str:
    """A value as a command-line override writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(as_override(v) for v in value) + "]"
    return str(value)


COMPARED = (*SECTIONS, "data", "tokenizer")  # the sections a resume compares, by their names in a config


def compared(hparams: dict) -> dict:
    """The sections a resume compares, of hyper-parameters as `to_hparams` writes them: the
    model, task, optimizer and schedule, the data section (a checkpoint of an earlier version
    may hold none: not compared) and the tokenizer's kind."""
    extra = hparams["extra"]
    out = {k: hparams[k] for k in SECTIONS}
    if extra.get("data") is not None:
        out["data"] = extra["data"]
    out["tokenizer"] = {"kind": extra["tokenizer_kind"]}
    return out


def command_sections(spec: ZooConfig) -> dict:
    """The command's sections as a resume compares them with a checkpoint's."""
    return compared(to_hparams(spec))


def trained_with(hparams: dict, where: str) -> TrainedConfig:
    """The config a checkpoint's hyper-parameters hold (`from_hparams`): a key added since it
    was written reads as the default it ran with (e.g. Muon's and WSD's keys, task.moe_*, a
    tokenizer kind not yet recorded: bytes). A config zoo cannot read is refused on one line."""
    try:
        return from_hparams(hparams)
    except (ConfigError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{where} holds a config zoo cannot read: {exc}") from None


def saved_sections(trained: TrainedConfig) -> dict:
    """A checkpoint's sections in the form `command_sections` gives."""
    return compared(to_hparams(trained))
