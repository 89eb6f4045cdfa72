"""The root schema composed by `zoo-train` and `zoo.compose`; validated
(`zoo.config.schema.validate.validate`), it is the one config a run's training, task, resume
and checkpoints receive, and no one changes it on the way: frozen all the way down (every section
a frozen dataclass, the trainer section a `TrainerConfig`, list-valued fields tuples and
dict-valued ones `FrozenMap`s)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zoo.config.schema.data import DataConfig, TokenizerConfig
from zoo.config.schema.frozen import settle
from zoo.config.schema.logger import LoggerConfig
from zoo.config.schema.model import ModelConfig
from zoo.config.schema.task import TaskConfig
from zoo.config.schema.train import (
    CallbacksConfig,
    OptimConfig,
    SchedulerConfig,
)
from zoo.config.schema.trainer import TrainerConfig

MISSING: Any = "???"  # OmegaConf's mark of a value still to be set (omegaconf.MISSING), without importing it

# The trainer section: a TrainerConfig in every ZooConfig, a dict at run time for OmegaConf's
# composition of the schema (any Lightning Trainer argument may be added: +trainer.NAME=VALUE).
if TYPE_CHECKING:
    TrainerSection = TrainerConfig
else:
    TrainerSection = dict[str, Any]


@dataclass(kw_only=True, frozen=True)
class ZooConfig:
    # MISSING (not a default instance) so derived model values are filled in only after all
    # overrides are merged, never baked into the composed config.
    model: ModelConfig = MISSING
    task: TaskConfig = MISSING
    data: DataConfig = MISSING
    tokenizer: TokenizerConfig = MISSING
    optim: OptimConfig = MISSING
    scheduler: SchedulerConfig = MISSING
    trainer: TrainerSection = field(default_factory=TrainerSection)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    callbacks: CallbacksConfig = field(default_factory=CallbacksConfig)
    seed: int = field(default=0, metadata={"help": "global seed for weights, data order, dropout"})
    ckpt_path: str | None = field(
        default=None,
        metadata={"help": "resume from this checkpoint; 'last' = the run directory's last.ckpt"},
    )
    branch_from: str | None = field(
        default=None,
        metadata={
            "help": "RUN/checkpoints/FILE.ckpt of a run in its stable phase: start a new run directory "
            "from its weights, optimizer state, data position and step N, with scheduler=wsd's "
            "cooldown of scheduler.decay_steps from step N (trainer.max_steps=${zoo.branch_end:} "
            "ends the run with it); the record names the parent run and step"
        },
    )
    init_from: str | None = field(
        default=None,
        metadata={
            "help": "hf:DIR: start from the weights of a Hugging Face model directory "
            "(save_pretrained); its config fixes model.* (except model.dropout) and its "
            "tokenizer becomes tokenizer=hf; a resumed checkpoint wins over it"
        },
    )

    def __post_init__(self) -> None:
        if not isinstance(self.trainer, TrainerConfig):  # a mapping of Trainer arguments, checked
            settle(self, "trainer", TrainerConfig(self.trainer))
