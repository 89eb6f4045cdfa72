"""Next-token prediction (Radford et al. 2018): labels are the inputs shifted by one."""

from __future__ import annotations

from zoo.config.model import Family
from zoo.tasks.base import ZooTask


class CausalLM(ZooTask):
    token_level = True
    families = (Family.decoder_only,)

    def forward_batch(self, batch):
        return self.predict_tokens(batch)
