"""collate_fns: lists of examples -> dicts of batch-first LongTensors, one file per task
shape; `collate_for` picks the one a task's row of `zoo.config.facts.tasks.TASK_SPECS` names."""

from zoo.data.collate.causal import collate_causal
from zoo.data.collate.classification import collate_classification
from zoo.data.collate.masked import IGNORE_INDEX, MaskingCollator
from zoo.data.collate.padding import pad
from zoo.data.collate.select import collate_for
from zoo.data.collate.seq2seq import collate_seq2seq

__all__ = [
    "IGNORE_INDEX",
    "MaskingCollator",
    "collate_causal",
    "collate_classification",
    "collate_for",
    "collate_seq2seq",
    "pad",
]
