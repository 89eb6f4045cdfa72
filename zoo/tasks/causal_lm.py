"""Next-token prediction (Radford et al. 2018): labels are the inputs shifted by one."""

from __future__ import annotations

from zoo.config.facts.tasks import TaskKind, families_of
from zoo.tasks.base import ZooTask


class CausalLM(ZooTask):
    kind = TaskKind.causal_lm
    families = families_of(kind)
    token_level = True

    def forward_batch(self, batch):
        return self.predict_tokens(batch)
