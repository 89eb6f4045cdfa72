"""Masked-language modelling (Devlin et al. 2019): predict the tokens the collator hid
(15% of tokens; 80% [MASK], 10% random, 10% kept); labels are -100 elsewhere."""

from __future__ import annotations

from zoo.config.model import Family
from zoo.tasks.base import ZooTask


class MaskedLM(ZooTask):
    token_level = True
    sparse_targets = True
    families = (Family.encoder_only,)

    def forward_batch(self, batch):
        return self.predict_tokens(batch)
