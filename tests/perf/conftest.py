"""What the speed-switch and compiled-graph tests share: each family's default task and a
small batch of its shape."""

from __future__ import annotations

import torch

from zoo.config.facts.tasks import task_of_family
from zoo.config.schema.model import Family

TASK_OF = {family.value: task_of_family(family).value for family in Family}  # each family's default task


def batch_for(family: str, B: int = 3, T: int = 10, V: int = 37) -> dict:
    ids = torch.randint(4, V, (B, T))
    mask = torch.ones(B, T, dtype=torch.long)
    mask[0, -3:] = 0  # one padded row
    labels = torch.randint(0, V, (B, T)).masked_fill(mask == 0, -100)
    if family == "encoder_only":
        labels = labels.masked_fill(torch.rand(B, T) > 0.3, -100)  # masked LM: a few targets
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    if family == "encoder_decoder":
        batch["decoder_input_ids"] = torch.randint(4, V, (B, T))
    return batch
