"""zoo's own model in a comparison: the training step is the task's (`ZooTask.training_loss`,
so the output loss is computed as `zoo-train` computes it, and `ZooTask.after_optimizer_step`,
so a mixture balanced by bias updates its selection bias as it does there), the optimizer zoo's
AdamW with its parameter groups, generation `zoo.models.generate`."""

from __future__ import annotations

import torch

from zoo.bench.workload import Workload, decoding_copy, optimizer_step
from zoo.config.facts.optimizers import OptimizerKind, read_by
from zoo.config.facts.tasks import task_of_family
from zoo.data.collate.padding import without_full_masks
from zoo.data.tokenizers.base import SPECIAL_IDS
from zoo.models.base import ZooModel
from zoo.models.generate import GenerationConfig, generate
from zoo.tasks import TASKS
from zoo.tasks.optim import build_optimizer


def _optim_settings(work: Workload, optim: dict) -> dict:
    """The workload's optimizer settings that the chosen kind's row reads (AdamW unless `optim`
    names another), then `optim`'s own."""
    kind = OptimizerKind.parse(optim.get("kind", OptimizerKind.adamw), "optim.kind")
    common = {"lr": work.lr, "betas": list(work.betas), "eps": work.eps, "weight_decay": work.weight_decay}
    return {**read_by(kind, common), **optim, "kind": kind.value}


def zoo_task(work: Workload, task: dict | None = None, optim: dict | None = None):
    """The LightningModule zoo-train would build for this workload's model (dropout as given),
    training its family's default task (`zoo.config.facts.tasks.task_of_family`)."""
    kind = task_of_family(work.family)
    return TASKS[kind](
        model=work.model.to_dict(),
        task={"kind": kind.value, **(task or {})},
        optim=_optim_settings(work, optim or {}),
        scheduler={"kind": "constant", "warmup_steps": 0},
    ).to(work.device)


class ZooSubject:
    def __init__(
        self,
        work: Workload,
        *,
        name: str = "zoo",
        compile: bool = False,
        task: dict | None = None,
        optim: dict | None = None,
        state: dict | None = None,
    ) -> None:
        self.name, self.work = name, work
        # compiled: generation uses the static-shape decoding step, compiled (zoo-generate
        # static_cache=true compile=true)
        self.generation = GenerationConfig(static_cache=compile, compile=compile)
        self.task = zoo_task(work, {"compile": compile, **(task or {})}, optim)
        if state is not None:
            self.task.model.load_state_dict(state)
        self.model = self.task.model
        self._fed: tuple = (None, None)  # (batch, what the model is fed)
        self._decoder: ZooModel | None = None  # what generate decodes with, made at its first call
        self.optimizer = build_optimizer(self.task, self.task.optim_config, output_embedding=self.model.lm_head.weight)

    def _feed(self, batch: dict) -> dict:
        """The batch as zoo-train hands it to the model: a mask without padding left out
        (`ZooDataModule.on_before_batch_transfer`), looked at once per batch."""
        if self._fed[0] is not batch:
            self._fed = (batch, without_full_masks(batch))
        return self._fed[1]

    def train_step(self, batch: dict) -> None:
        batch = self._feed(batch)
        optimizer_step(self.work, self.model, self.optimizer, lambda: self.task.training_loss(batch)[0])
        self.task.after_optimizer_step()  # as zoo-train's step: the MoE selection bias (moe_balance=bias)

    @torch.no_grad()
    def forward(self, batch: dict) -> None:
        self.model.eval()
        batch = self._feed(batch)
        extra = {"decoder_input_ids": batch["decoder_input_ids"]} if self.work.stacks.cross_attention else {}
        with self.work.autocast():
            self.model(batch["input_ids"], attention_mask=batch.get("attention_mask"), **extra)

    def generate(self, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor | None:
        if not self.work.stacks.decoder:  # nothing to generate with
            return None
        bos = SPECIAL_IDS["bos"] if self.work.stacks.cross_attention else None  # zoo's own specials
        if self._decoder is None:  # the bf16 variants decode a bf16 copy, as zoo-generate dtype=bfloat16 does
            self._decoder = decoding_copy(self.work, self.model)
        with self.work.autocast():
            return generate(self._decoder, prompt, config=self.generation, max_new_tokens=new_tokens, bos_id=bos)
