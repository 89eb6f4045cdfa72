"""Next-token prediction (Radford et al. 2018): labels are the inputs shifted by one."""

from __future__ import annotations

from zoo.config.model import Family
from zoo.tasks.base import ZooTask


class CausalLM(ZooTask):
    families = (Family.decoder_only,)

    def forward_batch(self, batch):
        out = self.model(batch["input_ids"], attention_mask=batch.get("attention_mask"))
        V = out.logits.shape[-1]
        return out.logits.reshape(-1, V), batch["labels"].reshape(-1), batch["input_ids"].numel()  # (B·T, V)
