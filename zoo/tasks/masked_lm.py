"""Masked-language modelling (Devlin et al. 2019): predict the tokens the collator hid
(15% of tokens; 80% [MASK], 10% random, 10% kept); labels are -100 elsewhere.

No val/bpb: each hidden token is predicted from the text on both sides of it, so the losses
do not add up to the code length of the text (as a left-to-right model's do, by the chain
rule) and bits per byte would compare with nothing."""

from __future__ import annotations

from zoo.config.facts.tasks import TaskKind, families_of
from zoo.tasks.base import ZooTask


class MaskedLM(ZooTask):
    kind = TaskKind.masked_lm
    families = families_of(kind)
    token_level = True
    sparse_targets = True

    def forward_batch(self, batch):
        return self.predict_tokens(batch)
