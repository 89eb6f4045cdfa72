"""Next-token prediction (Radford et al. 2018): labels are the inputs shifted by one; with
task.mtp_depth, DeepSeek-V3's multi-token prediction modules beside the model (`zoo.models.mtp`)."""

from __future__ import annotations

import torch

from zoo.config.facts.tasks import TaskKind, families_of
from zoo.models.base import TokenLoss
from zoo.models.init import Init
from zoo.models.mtp import MultiTokenPrediction
from zoo.tasks.base import ZooTask

MTP_PREFIX = "mtp"  # the modules' attribute, and their parameters' prefix in a checkpoint


class CausalLM(ZooTask):
    kind = TaskKind.causal_lm
    families = families_of(kind)
    token_level = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        depth = self.task_config.mtp_depth
        self.mtp: MultiTokenPrediction | None = None
        self.last_mtp_losses: list[torch.Tensor] | None = None
        if depth:
            with torch.random.fork_rng(devices=[]):  # their start comes from `head_rules`
                self.mtp = MultiTokenPrediction(self.model_config, depth)
            self.mtp.initialise(MTP_PREFIX, self.model.init_seed)

    def head_rules(self) -> dict[str, Init]:
        return self.mtp.init_rules(MTP_PREFIX) if self.mtp is not None else {}

    def forward_batch(self, batch):
        return self.predict_tokens(batch)

    def model_inputs(self, batch: dict):
        """The one stack's inputs; packed documents (data.document_mask=true: the batch carries
        `document_ids` (B, T)) are attended apart, in training, validation and zoo-eval alike."""
        inputs, labels, n_tokens = super().model_inputs(batch)
        if batch.get("document_ids") is not None:
            inputs["document_ids"] = batch["document_ids"]
        return inputs, labels, n_tokens

    def training_loss(self, batch: dict) -> tuple[torch.Tensor, int, int]:
        """Without task.mtp_depth, the shared token loss. With it: L + (λ/D)·Σ_k L_k, the main
        model's loss (with its z-loss) plus λ = task.mtp_weight times the mean of the D modules'
        cross-entropies (DeepSeek-V3 eq. 25); train/loss stays the main cross-entropy and each
        depth's is kept in `last_mtp_losses` for `training_step` to log."""
        self.last_mtp_losses = None
        if self.mtp is None:
            return super().training_loss(batch)
        inputs, labels, n_tokens = self.model_inputs(batch)
        if inputs.get("attention_mask") is not None or inputs.get("document_ids") is not None:
            raise ValueError("task.mtp_depth trains on packed windows without padding or document masks")
        options = self.loss_options(labels)
        hidden = self.model(**inputs, return_logits=False).hidden_states  # (B, T, D)
        main = self.model.token_losses(hidden.reshape(-1, hidden.shape[-1]), labels.reshape(-1), **options)
        depths = self.mtp.losses(
            self.model,
            hidden,
            inputs["input_ids"],
            labels,
            chunk=options["chunk"],
            label_smoothing=options["label_smoothing"],
            output_loss=options["output_loss"],
        )
        mtp = torch.stack([d.loss for d in depths]).mean()  # (1/D)·Σ_k L_k
        loss = main.loss + self.task_config.mtp_weight * mtp
        self.last_loss_parts = TokenLoss(loss.detach(), main.cross_entropy, main.z)
        self.last_mtp_losses = [d.cross_entropy for d in depths]
        return self.add_router_losses(loss), labels.numel(), n_tokens

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor | None:
        loss = super().training_step(batch, batch_idx)
        for k, value in enumerate(self.last_mtp_losses or [], start=1):  # each depth apart, unweighted
            self.log(f"train/mtp_loss_{k}", value, batch_size=batch["labels"].numel())
        return loss
