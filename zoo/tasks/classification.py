"""Sequence classification: one vector pooled from the model's final states ([CLS], mean or
last real token), then a linear head over the labels."""

from __future__ import annotations

import torch
from torch import nn
from torchmetrics.classification import MulticlassAccuracy

from zoo.config.facts.families import FAMILY_FACTS
from zoo.config.facts.tasks import TaskKind, families_of
from zoo.config.schema.task import Pooling
from zoo.models.init import ZEROS, Init, initialise, normal
from zoo.tasks.base import ZooTask


def pool(hidden: torch.Tensor, mask: torch.Tensor | None, how: Pooling) -> torch.Tensor:
    """hidden (B, T, D), mask (B, T) -> (B, D)."""
    if mask is None:
        mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device)
    if how == Pooling.cls:
        return hidden[:, 0]
    if how == Pooling.mean:
        m = mask.to(hidden.dtype)[..., None]  # (B, T, 1)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1)
    last = mask.long().sum(1).clamp(min=1) - 1  # (B,) index of the last real token (right padding)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


class Classification(ZooTask):
    kind = TaskKind.classification
    families = families_of(kind)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        labels = self.extras.labels
        if not labels:
            raise ValueError("classification needs the label names (extra.labels) from the data")
        self.labels = list(labels)
        # the classifier replaces the token output projection: no unused parameters (DDP),
        # no (B, T, V) logits computed for nothing; under mup the head is an output layer (its
        # input x 1/m in `classify`, its initialisation and learning rate those of the base model)
        self.model.drop_output_head()
        with torch.random.fork_rng(devices=[]):  # its own start comes from `head_rules`
            self.head = nn.Linear(self.model_config.d_model, len(self.labels))
        initialise(self.head.named_parameters(prefix="head"), self.head_rules(), self.model.init_seed)
        self.val_accuracy = MulticlassAccuracy(num_classes=len(self.labels), average="micro")
        default = Pooling.last if FAMILY_FACTS[self.model_config.family].decoder else Pooling.cls
        self.pooling = self.task_config.pooling or default

    def head_rules(self) -> dict[str, Init]:
        return {"head.weight": normal(self.model_config.init_std), "head.bias": ZEROS}

    def _accuracy(self):
        return None  # replaced in __init__ once the number of labels is known

    def classify(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """-> logits over labels (B, C)."""
        hidden = self.model(input_ids, attention_mask=attention_mask, return_logits=False).hidden_states  # (B, T, D)
        pooled = pool(hidden, attention_mask, self.pooling)  # (B, D)
        if self.model_config.width_mult != 1.0:
            pooled = pooled / self.model_config.width_mult  # μP: the head is an output layer, x 1/m
        return self.head(pooled)

    def forward_batch(self, batch):
        logits = self.classify(batch["input_ids"], batch.get("attention_mask"))
        return logits, batch["labels"].reshape(-1), batch["input_ids"].numel()
