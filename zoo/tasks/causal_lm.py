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

    def model_inputs(self, batch: dict):
        """The one stack's inputs; packed documents (data.document_mask=true: the batch carries
        `document_ids` (B, T)) are attended apart, in training, validation and zoo-eval alike."""
        inputs, labels, n_tokens = super().model_inputs(batch)
        if batch.get("document_ids") is not None:
            inputs["document_ids"] = batch["document_ids"]
        return inputs, labels, n_tokens
