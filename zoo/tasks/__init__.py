"""Tasks: LightningModules that own the loss, metrics and optimizer of one objective."""

from zoo.config.train import TaskKind
from zoo.tasks.base import ZooTask
from zoo.tasks.causal_lm import CausalLM
from zoo.tasks.classification import Classification
from zoo.tasks.masked_lm import MaskedLM
from zoo.tasks.seq2seq import Seq2Seq

TASKS: dict[TaskKind, type[ZooTask]] = {
    TaskKind.causal_lm: CausalLM,
    TaskKind.masked_lm: MaskedLM,
    TaskKind.seq2seq: Seq2Seq,
    TaskKind.classification: Classification,
}

__all__ = ["TASKS", "CausalLM", "Classification", "MaskedLM", "Seq2Seq", "ZooTask"]
