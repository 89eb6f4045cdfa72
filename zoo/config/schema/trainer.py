"""The `trainer:` section (`TrainerConfig`) is passed to Lightning's Trainer as it is (any Trainer
argument may be added with `+trainer.NAME=VALUE`); the arguments zoo's configs set are checked
here first, so a wrong value is one line naming the key instead of a traceback from inside
Lightning."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from zoo.config.errors import ConfigError
from zoo.config.schema.frozen import FrozenMap

_TIME = re.compile(r"^\d+:\d{1,2}:\d{1,2}:\d{1,2}$")


def _int(minimum: int, none_ok: bool = False):
    def check(key: str, value: Any) -> None:
        if value is None and none_ok:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(
                f"trainer.{key} must be an integer >= {minimum}{' or null' if none_ok else ''}, got {value!r}"
            )

    return check


def _batches(key: str, value: Any) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value < 0
        or (isinstance(value, float) and value > 1.0)
    ):
        raise ConfigError(
            f"trainer.{key} must be a number of batches (an integer >= 0) or a fraction "
            f"of them (a float in [0, 1]), got {value!r}"
        )


def _val_interval(key: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, str) and _TIME.match(value):
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value <= 0
        or (isinstance(value, float) and value > 1.0)
    ):
        raise ConfigError(
            f"trainer.val_check_interval must be a number of steps (an integer >= 1), a "
            f"fraction of an epoch (a float in (0, 1]), a time 'DD:HH:MM:SS' or null, got {value!r}"
        )


def _clip(key: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
        raise ConfigError(f"trainer.{key} must be a number >= 0 or null, got {value!r}")


CHECKS = {
    "max_steps": _int(-1),
    "max_epochs": _int(-1, none_ok=True),
    "num_nodes": _int(1),
    "log_every_n_steps": _int(1),
    "check_val_every_n_epoch": _int(1, none_ok=True),
    "accumulate_grad_batches": _int(1),
    "val_check_interval": _val_interval,
    "limit_val_batches": _batches,
    "limit_train_batches": _batches,
    "gradient_clip_val": _clip,
}


def check_trainer(trainer: Mapping[str, Any]) -> None:
    """ConfigError for a value of a known Trainer argument that Lightning would reject."""
    for key, check in CHECKS.items():
        if key in trainer:
            check(key, trainer[key])
    check_trains_and_validates(trainer)
    check_replicate(trainer)


def check_trains_and_validates(trainer: Mapping[str, Any]) -> None:
    """A run that trains no step or skips validation would still end as "finished", with a
    summary that reports nothing trained or no metrics: Lightning's debugging switches that do
    so are refused before the run starts, naming what to use instead."""
    fast = trainer.get("fast_dev_run")
    if fast not in (None, False, 0):
        raise ConfigError(
            f"trainer.fast_dev_run={fast} is refused: Lightning then saves no checkpoint and logs "
            f"no metrics, yet the run would be recorded as finished; for a quick run use "
            f"trainer.max_steps=N trainer.limit_val_batches=N"
        )
    for key, what in (("limit_train_batches", "trains no step"), ("limit_val_batches", "skips validation")):
        value = trainer.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
            raise ConfigError(
                f"trainer.{key}={value} {what}, and a run that {what} is not a finished run; "
                f"give a number of batches >= 1 or a fraction in (0, 1]"
            )
    if trainer.get("max_epochs") == 0 and trainer.get("max_steps", -1) in (None, -1):
        raise ConfigError(
            "trainer.max_epochs=0 trains no step, and a run that trains no step is not a finished "
            "run; give trainer.max_epochs >= 1 or trainer.max_steps >= 1"
        )


# trainer.strategy that shards parameters (FSDP2, `zoo.training.distributed.fsdp`): over every rank (fsdp),
# or within groups of ranks, replicated across the groups (hsdp, hybrid sharding: within a node,
# replicated across nodes), and the precisions they run: float16 mixed precision needs a
# gradient scaler that sharded training here has not
SHARDED_STRATEGY = "fsdp"
HYBRID_STRATEGY = "hsdp"
SHARDED_STRATEGIES = (SHARDED_STRATEGY, HYBRID_STRATEGY)
SHARDED_PRECISIONS = ("32-true", "bf16-mixed", "bf16-true", "16-true")
# zoo's own trainer key (taken out before the rest reaches Lightning's Trainer): how many
# replicas trainer.strategy=hsdp keeps (the replicate axis of its mesh); null: trainer.num_nodes
REPLICATE_KEY = "replicate"


def is_sharded_name(strategy: Any) -> bool:
    return isinstance(strategy, str) and strategy in SHARDED_STRATEGIES


def check_replicate(trainer: Mapping[str, Any]) -> None:
    """trainer.replicate: only under hsdp; an integer >= 1 dividing the world size where that is
    known before any process starts."""
    if REPLICATE_KEY not in trainer:
        return
    value = trainer[REPLICATE_KEY]
    if trainer.get("strategy") != HYBRID_STRATEGY:
        if value is None:
            return
        raise ConfigError(
            f"trainer.replicate={value} applies to trainer.strategy=hsdp only "
            f"(got trainer.strategy={trainer.get('strategy')}); use trainer=hsdp"
        )
    if value is None:
        return
    _int(1)(REPLICATE_KEY, value)
    devices, nodes = trainer.get("devices"), trainer.get("num_nodes", 1)
    if isinstance(devices, int) and devices > 0 and isinstance(nodes, int) and nodes > 0 and (devices * nodes) % value:
        raise ConfigError(
            f"trainer.replicate={value} must divide the {devices * nodes} devices "
            f"(trainer.devices={devices} x trainer.num_nodes={nodes}): each replica shards "
            f"the model over the same number of them"
        )


class TrainerConfig(FrozenMap[str, Any]):
    """The `trainer:` section: the Lightning Trainer arguments the config gives, read-only and
    checked (`check_trainer`) when it is made; `L.Trainer(**trainer)` receives them unchanged.

    It stays a mapping of what the config gives rather than one field per argument: any Trainer
    argument may be added (`+trainer.NAME=VALUE`), and an argument left out must reach Lightning
    left out (its default, not one written here). The arguments zoo itself reads are typed
    properties, each with the value the run takes when the config leaves it out."""

    __slots__ = ()

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        super().__init__(items or {})
        check_trainer(self)

    @property
    def max_steps(self) -> int:
        """Optimizer steps the run trains; -1: as many as trainer.max_epochs take."""
        value = self.get("max_steps")
        return -1 if value is None else int(value)

    @property
    def max_epochs(self) -> int | None:
        return self.get("max_epochs")

    @property
    def accelerator(self) -> str:
        return str(self.get("accelerator", "auto"))

    @property
    def devices(self) -> int | str | list[int]:
        """Devices per node: a count, "auto", or a list of device indices."""
        return self.get("devices", 1)

    @property
    def num_nodes(self) -> int:
        return int(self.get("num_nodes", 1))

    @property
    def strategy(self) -> str | None:
        """The strategy's name (auto, ddp, fsdp, hsdp, ...); None when the config names none."""
        value = self.get("strategy")
        return None if value is None else str(value)

    @property
    def precision(self) -> str:
        return str(self.get("precision", "32-true"))

    @property
    def gradient_clip_val(self) -> float:
        """The gradient-norm clip; 0: none (also when the config gives null)."""
        return float(self.get("gradient_clip_val") or 0)

    @property
    def replicate(self) -> int | None:
        """hsdp: the replicas of its mesh; None: trainer.num_nodes."""
        return self.get(REPLICATE_KEY)
