"""Typed schema of a run's loggers: metrics.csv, TensorBoard, and the experiment trackers
MLflow and Weights & Biases (each an optional extra). Any number of them at once:
`logger=[csv,mlflow,wandb]` merges the group's files. No torch import."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.schema.frozen import FrozenMap, Items, freeze_items, settle

# MLflow's extra tags: a FrozenMap in every validated config, a dict at run time for OmegaConf's
# composition (+logger.mlflow.tags.NAME=VALUE adds a key)
if TYPE_CHECKING:
    Tags = FrozenMap[str, str]
else:
    Tags = dict[str, str]


class WandbMode(Choice):
    """Where a W&B run goes."""

    auto = "auto"  # online when an API key is set (WANDB_API_KEY or `wandb login`), else offline
    online = "online"  # to the W&B server (needs a key)
    offline = "offline"  # only the run directory's wandb/ (`wandb sync` uploads it later)


@dataclass(kw_only=True, frozen=True)
class MLflowConfig:
    enabled: bool = field(default=False, metadata={"help": "record the run in MLflow (logger=mlflow)"})
    tracking_uri: str | None = field(
        default=None,
        metadata={
            "help": "the tracking server, named on the command line (http://HOST:PORT), or a store in "
            "the run directory (sqlite:///NAME.db); null: $MLFLOW_TRACKING_URI, else "
            "sqlite:///mlflow.db in the run directory"
        },
    )
    experiment: str | None = field(
        default=None,
        metadata={"help": "the MLflow experiment; null: the sweep's directory (a sweep) or the run's (a single run)"},
    )
    tags: Tags = field(
        default_factory=Tags, metadata={"help": "extra tags of the MLflow run: +logger.mlflow.tags.NAME=VALUE"}
    )

    def __post_init__(self) -> None:
        settle(self, "tags", FrozenMap(self.tags))
        if self.experiment is not None and not str(self.experiment).strip():
            raise ConfigError("logger.mlflow.experiment must be a name or null, got an empty string")
        if self.tracking_uri is not None and not str(self.tracking_uri).strip():
            raise ConfigError("logger.mlflow.tracking_uri must be a URI or null, got an empty string")


@dataclass(kw_only=True, frozen=True)
class WandbConfig:
    enabled: bool = field(default=False, metadata={"help": "record the run in Weights & Biases (logger=wandb)"})
    project: str = field(default="zoo", metadata={"help": "the W&B project"})
    entity: str | None = field(default=None, metadata={"help": "the W&B team or user; null: the key's default"})
    mode: WandbMode = field(default=WandbMode.auto, metadata={"help": "online, offline, or auto (online with a key)"})
    group: str | None = field(
        default=None,
        metadata={"help": "the W&B group; null: the sweep's directory (a sweep) or none (a single run)"},
    )
    tags: Items[str] = field(
        default_factory=Items[str], metadata={"help": "tags of the W&B run: logger.wandb.tags=[a,b]"}
    )

    def __post_init__(self) -> None:
        settle(self, "mode", WandbMode.parse(self.mode, "logger.wandb.mode"))
        settle(self, "tags", freeze_items(self.tags))
        if not str(self.project).strip():
            raise ConfigError("logger.wandb.project must be a name, got an empty string")
        if len(str(self.project)) > 128:
            raise ConfigError(f"logger.wandb.project is {len(self.project)} characters; W&B allows 128")


@dataclass(kw_only=True, frozen=True)
class LoggerConfig:
    csv: bool = field(default=True, metadata={"help": "metrics.csv in the run directory"})
    tensorboard: bool = field(default=False, metadata={"help": "TensorBoard events under tb/"})
    mlflow: MLflowConfig = field(default_factory=MLflowConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)

    def __post_init__(self) -> None:
        settle(self, "mlflow", _section(self.mlflow, MLflowConfig, "logger.mlflow"))
        settle(self, "wandb", _section(self.wandb, WandbConfig, "logger.wandb"))

    @property
    def trackers(self) -> list[str]:
        """The experiment trackers this run records into, by their group option name."""
        return [name for name, on in (("mlflow", self.mlflow.enabled), ("wandb", self.wandb.enabled)) if on]


def _section(value: Any, schema: type, prefix: str):
    """A nested section given as a mapping (a composed config) as its schema; unknown keys named."""
    if isinstance(value, schema):
        return value
    if value is None:
        return schema()
    if not isinstance(value, Mapping):
        raise ConfigError(f"{prefix} must be a mapping, got {type(value).__name__}")
    known = {f.name for f in fields(schema)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise ConfigError(f"unknown key {prefix}.{unknown[0]}; allowed: {', '.join(sorted(known))}")
    return schema(**dict(value))
