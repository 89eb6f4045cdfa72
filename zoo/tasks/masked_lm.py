"""Masked-language modelling (Devlin et al. 2019): predict the tokens the collator hid
(15% of tokens; 80% [MASK], 10% random, 10% kept); labels are -100 elsewhere."""

from __future__ import annotations

from zoo.config.tasks import TaskKind, families_of
from zoo.tasks.base import ZooTask


class MaskedLM(ZooTask):
    kind = TaskKind.masked_lm
    families = families_of(kind)
    token_level = True
    sparse_targets = True

    def forward_batch(self, batch):
        return self.predict_tokens(batch)
