"""What every system in a comparison runs: the same random batches, the same optimizer settings,
the same precision, and the protocol (`Subject`) each system's adapter implements."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import torch

from zoo.config.facts.families import FamilyFacts, family_facts
from zoo.config.schema.model import Family, ModelConfig

M = TypeVar("M", bound=torch.nn.Module)
MLM_RATE = 0.15  # share of positions with a target in a masked-LM batch (Devlin et al. 2019)


@dataclass(kw_only=True)
class Workload:
    """Shapes and optimizer of one comparison. Batches are random tokens: throughput does not
    depend on their values."""

    model: ModelConfig
    batch: int
    seq_len: int
    device: torch.device
    bf16: bool = False
    lr: float = 3e-4
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.1

    @property
    def family(self) -> Family:
        return self.model.family

    @property
    def stacks(self) -> FamilyFacts:
        """The family's row: which stacks it has (`zoo.config.facts.families`)."""
        return family_facts(self.family)

    def autocast(self):
        """bf16 autocast on the workload's device, or nothing."""
        if not self.bf16:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    def training_batch(self, seed: int = 0) -> dict:
        """input_ids (B, T); labels (B, T) aligned with the outputs (next tokens; masked LM:
        -100 except on ~15% of positions); decoder_input_ids (B, T) for encoder-decoders."""
        g = torch.Generator().manual_seed(seed)
        V, B, T = self.model.vocab_size, self.batch, self.seq_len
        ids = torch.randint(8, V, (B, T + 1), generator=g)  # (B, T + 1)
        batch = {"input_ids": ids[:, :-1], "labels": ids[:, 1:]}
        if not self.stacks.decoder:  # an encoder alone: masked-LM targets
            keep = torch.rand(B, T, generator=g) < MLM_RATE
            batch = {"input_ids": ids[:, :-1], "labels": ids[:, :-1].masked_fill(~keep, -100)}
        elif self.stacks.cross_attention:  # a target stack of its own
            target = torch.randint(8, V, (B, T + 1), generator=g)
            batch["decoder_input_ids"], batch["labels"] = target[:, :-1], target[:, 1:]
        batch["attention_mask"] = torch.ones(B, T, dtype=torch.long)
        return {k: v.contiguous().to(self.device) for k, v in batch.items()}

    def prompt(self, batch: int, length: int, seed: int = 1) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        return torch.randint(8, self.model.vocab_size, (batch, length), generator=g).to(self.device)

    def adamw(self, params) -> torch.optim.Optimizer:
        """The peers' optimizer: the same update as zoo's, with the kernels zoo picks by default
        (fused on CUDA), so the comparison is of the models and the losses."""
        fused = {"fused": True} if self.device.type == "cuda" else {}
        return torch.optim.AdamW(
            params, lr=self.lr, betas=self.betas, eps=self.eps, weight_decay=self.weight_decay, **fused
        )

    @property
    def tokens_per_step(self) -> int:
        """Input tokens per training step (encoder-decoder: source and target)."""
        per_row = self.seq_len * (2 if self.stacks.cross_attention else 1)
        return self.batch * per_row


def decoding_copy(work: Workload, model: M) -> M:
    """What a system decodes with: `model` itself, or in a bf16 variant a copy of it with
    bfloat16 weights, as users decode in bf16 (zoo-generate dtype=bfloat16, transformers'
    torch_dtype, gpt-fast), so that a decoding step reads 2 bytes a weight. Autocast over
    float32 weights would cast every weight at every step: 8 bytes of traffic a weight. The
    copy is made once, from the weights as they are; training steps go on with `model`."""
    if not work.bf16:
        return model
    import copy

    return copy.deepcopy(model).to(torch.bfloat16)


def optimizer_step(
    work: Workload, module: torch.nn.Module, optimizer: torch.optim.Optimizer, loss_of: Callable[[], torch.Tensor]
) -> None:
    """One training step, the same for every system: train mode, the loss under the workload's
    precision, backward, optimizer step, gradients dropped."""
    module.train()
    with work.autocast():
        loss = loss_of()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


class Subject(Protocol):
    """One system's model in a comparison."""

    name: str
    model: torch.nn.Module  # what is counted (parameters, FLOPs) and, for the peers, built from zoo's
    optimizer: torch.optim.Optimizer  # what train_step steps: zoo's settings (`Workload.adamw` for the peers)

    def train_step(self, batch: dict) -> None:
        """Forward, loss, backward and optimizer step."""

    def forward(self, batch: dict) -> None:
        """Inference forward pass (logits), no gradients."""

    def generate(self, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor | None:
        """Greedy decoding with the KV cache: exactly `new_tokens` new tokens per row, or None
        when the system cannot generate with this model (encoder-only)."""
