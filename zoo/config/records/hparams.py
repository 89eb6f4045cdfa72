"""A run's typed config as a checkpoint's hyper-parameters, and back: the one pair of functions
between them.

`to_hparams` gives the plain data a task is built from (`ZooTask(**hparams)`), which Lightning
records as the task's hyper-parameters: in every checkpoint (read back with
`torch.load(weights_only=True)`, so it must hold nothing but plain data), in hparams.yaml (plain
YAML, never a `!!python` tag) and in what `load_from_checkpoint` passes back to the task.
`from_hparams` reads such data, from this version or an earlier one, as schema objects: the task
builds itself from them, a resume and a branch compare them with the command's
(`zoo.training.resume.match`), and `zoo.training.checkpoint.files.load_checkpoint` rebuilds the
task they name. A key a checkpoint predates reads as its schema's default, which keeps the
behaviour of the versions before it (`zoo.config.schema.model.model_defaults`); a key no schema
has is refused on one line, as in a composed config. The `extra` hyper-parameter is
`CheckpointExtras`: what a checkpoint holds besides those sections."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from zoo.config.errors import ConfigError
from zoo.config.schema.convert import as_model_config, as_schema, plain
from zoo.config.schema.model import ModelConfig
from zoo.config.schema.root import ZooConfig
from zoo.config.schema.task import TaskConfig
from zoo.config.schema.train import OptimConfig, SchedulerConfig

SECTIONS = ("model", "task", "optim", "scheduler")  # the schema sections a checkpoint records, with `extra`


@dataclass(frozen=True)
class CheckpointExtras:
    """What a checkpoint holds besides its model, task, optimizer and schedule sections (the
    task's `extra` hyper-parameter): the tokenizer's kind and special ids, the run's data
    section and, for classification, the label names."""

    tokenizer_kind: str = "byte"  # the kind the data was encoded with (`tokenizer.kind`)
    special_ids: dict[str, int | None] = field(default_factory=dict)  # pad, unk, bos, eos, mask, cls
    data: dict[str, Any] | None = None  # the run's data section: zoo-eval's default dataset
    labels: list[str] | None = None  # classification: the label names, in class order
    unknown: dict[str, Any] = field(default_factory=dict)  # keys of another zoo version, kept

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"special_ids": dict(self.special_ids), "tokenizer_kind": self.tokenizer_kind}
        if self.data is not None:
            out["data"] = dict(self.data)
        if self.labels is not None:
            out["labels"] = list(self.labels)
        return {**out, **{k: v for k, v in self.unknown.items() if k not in out}}

    @classmethod
    def read(cls, extra: dict[str, Any] | None) -> CheckpointExtras:
        """The extras of a checkpoint's `hyper_parameters["extra"]` (None or {}: a checkpoint
        written without them, whose tokenizer was bytes)."""
        extra = dict(extra or {})
        known = {"tokenizer_kind", "special_ids", "data", "labels"}
        return cls(
            tokenizer_kind=str(extra.get("tokenizer_kind", "byte")),
            special_ids=dict(extra.get("special_ids") or {}),
            data=dict(extra["data"]) if extra.get("data") is not None else None,
            labels=list(extra["labels"]) if extra.get("labels") is not None else None,
            unknown={k: v for k, v in extra.items() if k not in known},
        )


@dataclass(frozen=True)
class TrainedConfig:
    """The config a checkpoint was trained with, typed: the model, task, optimizer and schedule
    sections, and the extras (tokenizer kind and special ids, data section, class labels)."""

    model: ModelConfig
    task: TaskConfig
    optim: OptimConfig = field(default_factory=OptimConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    extras: CheckpointExtras = field(default_factory=CheckpointExtras)


def to_hparams(
    config: ZooConfig | TrainedConfig,
    *,
    special_ids: Mapping[str, int | None] | None = None,
    labels: list[str] | None = None,
) -> dict[str, Any]:
    """The hyper-parameters of a task trained on `config`, as plain data (enums as their
    strings). From a `ZooConfig` the extras are its tokenizer kind and data section, with the
    tokenizer's `special_ids` and the classification `labels` the data module found; from a
    `TrainedConfig` they are its own."""
    if isinstance(config, ZooConfig):
        extras = CheckpointExtras(
            tokenizer_kind=config.tokenizer.kind.value,
            special_ids=dict(special_ids or {}),
            data=config.data.to_dict(),
            labels=list(labels) if labels else None,
        )
    else:
        extras = config.extras
    return {
        "model": config.model.to_dict(),
        "task": plain(config.task),
        "optim": plain(config.optim),
        "scheduler": plain(config.scheduler),
        "extra": extras.to_dict(),
    }


def from_hparams(hparams: Mapping[str, Any]) -> TrainedConfig:
    """The typed config of `hparams` (a checkpoint's `hyper_parameters`, or a task's own):
    model and task are required; an optimizer or schedule section that is missing (or None)
    reads as its defaults, as does every key a section predates. ConfigError on one line for a
    section that is not a mapping, a key no schema has, or a value the schema refuses."""
    missing = [k for k in ("model", "task") if not isinstance(hparams.get(k), Mapping)]
    if missing:
        raise ConfigError(f"the hyper-parameters lack {' and '.join(missing)}")
    extra = hparams.get("extra")
    if extra is not None and not isinstance(extra, Mapping):
        raise ConfigError(f"the hyper-parameters' extra must be a mapping, got {type(extra).__name__}")
    return TrainedConfig(
        model=as_model_config(hparams["model"]),
        task=as_schema(hparams["task"], TaskConfig, "task"),
        optim=as_schema(hparams.get("optim"), OptimConfig, "optim"),
        scheduler=as_schema(hparams.get("scheduler"), SchedulerConfig, "scheduler"),
        extras=CheckpointExtras.read(dict(extra) if extra is not None else None),
    )
