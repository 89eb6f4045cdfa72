"""What the peers that return logits from `model(input_ids)` share (x-transformers, litgpt, gpt-fast-style):
the training step on the cross-entropy of those logits, as their own training scripts compute
it, the inference forward, and the model they decode with (`decoder`: in the bf16 variants a
copy in bfloat16, as every system here decodes, `zoo.bench.workload.decoding_copy`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from zoo.bench.workload import Workload, decoding_copy, optimizer_step


class LogitsLMPeer:
    """Subclasses set `self.work` and `self.model` (input_ids (B, T) -> logits (B, T, V)), call
    `ready(compile)`, and implement `generate`."""

    work: Workload
    model: torch.nn.Module
    decoder: torch.nn.Module
    optimizer: torch.optim.Optimizer

    def ready(self, compile: bool, decoder: torch.nn.Module | None = None) -> None:
        """The decoding model (the model itself, or its bf16 copy in a bf16 variant; or
        `decoder`, as it is given), then the model and that copy compiled in place if asked, and
        zoo's AdamW settings."""
        self.decoder = decoding_copy(self.work, self.model) if decoder is None else decoder
        if compile:
            self.model.compile()
            if self.decoder is not self.model and decoder is None:
                self.decoder.compile()
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
