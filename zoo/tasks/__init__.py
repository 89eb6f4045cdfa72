"""Tasks: LightningModules that own the loss, metrics and optimizer of one objective. What data
each reads and which model families it trains is its row of `zoo.config.facts.tasks.TASK_SPECS`;
zoo/tasks/README.md says how to add one."""

from zoo.config.facts.tasks import TaskKind
from zoo.tasks.base import ZooTask
from zoo.tasks.causal_lm import CausalLM
from zoo.tasks.classification import Classification
from zoo.tasks.masked_lm import MaskedLM
from zoo.tasks.seq2seq import Seq2Seq

# task kind -> its class; each class names its own kind, the row of zoo.config.facts.tasks.TASK_SPECS
TASKS: dict[TaskKind, type[ZooTask]] = {task.kind: task for task in (CausalLM, MaskedLM, Seq2Seq, Classification)}

__all__ = ["TASKS", "CausalLM", "Classification", "MaskedLM", "Seq2Seq", "ZooTask"]
