"""What the peers that return logits from `model(input_ids)` share (x-transformers, litgpt, gpt-fast-style):
the training step on the cross-entropy of those logits, as their own training scripts compute
it, and the inference forward."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from zoo.bench.workload import Workload, optimizer_step


class LogitsLMPeer:
    """Subclasses set `self.work` and `self.model` (input_ids (B, T) -> logits (B, T, V)), call
    `ready(compile)`, and implement `generate`."""

    work: Workload
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer

    def ready(self, compile: bool) -> None:
        """Compile the model in place if asked, and give it zoo's AdamW settings."""
        if compile:
            self.model.compile()
        self.optimizer = self.work.adamw(self.model.parameters())

    def train_step(self, batch: dict) -> None:
        optimizer_step(self.work, self.model, self.optimizer, lambda: self._loss(batch))

    def _loss(self, batch: dict) -> torch.Tensor:
        logits = self.model(batch["input_ids"])  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1).float(), batch["labels"].flatten())  # (B·T, V)

    @torch.no_grad()
    def forward(self, batch: dict) -> None:
        self.model.eval()
        with self.work.autocast():
            self.model(batch["input_ids"])
