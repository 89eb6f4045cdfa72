"""A plan: the memory one device holds at the peak of a training step, by part, under a
precision and a data-parallel strategy, and the largest micro-batch that fits a device.

One device's step is simulated on fake tensors (`zoo.plan.trace`); a strategy changes what a
device holds of it:

- ddp: a whole copy, plus DDP's gradient buckets (a second copy of the gradients in the
  parameters' dtype: zoo's DDP keeps torch's gradient_as_bucket_view=False).
- fsdp over G devices (hsdp: G = world_size / replicate, each replica an FSDP group, so one
  device holds what FSDP over G holds): weights, gradients and AdamW's moments are 1/G each;
  the root unit (embeddings, position tables, final norms, output head) stays gathered for the
  whole step, two layers are gathered at a time (the one running and the one prefetched), in
  bf16 under bf16-mixed (autocast then makes no bf16 copies), and one layer's gradient is
  whole before its reduce-scatter (float32 under bf16-mixed). Muon's update of a matrix is
  whole on every rank (gathered, then orthogonalised whole): its work is not divided.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from zoo.config.errors import ConfigError
from zoo.config.facts.optimizers import optimizer_refusal
from zoo.config.facts.tasks import task_of_family
from zoo.config.schema.model import ModelConfig
from zoo.config.schema.task import OutputLoss
from zoo.config.schema.train import OptimizerImpl
from zoo.plan.bounds import MAX_BATCH, planned_seq_len
from zoo.plan.options import Device, LossPath, Optimizer, PlanOptions, Precision, Strategy
from zoo.plan.trace import CASTS, GRADIENTS, OPTIMIZER, PARTS, WEIGHTS, StepMemory, StepSetup, simulate_step
from zoo.tasks import TASKS

GATHERED, BUCKETS = "gathered for FSDP", "DDP gradient buckets"
LARGEST_BATCH = MAX_BATCH  # the largest micro-batch searched for


@dataclass(kw_only=True)
class Plan:
    """What one device holds at the step's peak (bytes by part) and whether it fits."""

    options: PlanOptions
    model: ModelConfig
    batch: int
    seq_len: int
    parts: dict[str, int]
    step: StepMemory

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    @property
    def fits(self) -> bool:
        return self.total <= self.options.usable_bytes

    @property
    def dominant(self) -> str:
        return max(self.parts, key=lambda part: self.parts[part])


def step_setup(options: PlanOptions, batch: int, seq_len: int) -> StepSetup:
    """The kernels zoo-train picks for `options`: the output loss (auto: chunked on the CPU,
    logits on CUDA) and AdamW's implementation (auto: fused on CUDA, foreach where Lightning
    clips gradients in mixed precision, torch's default, one tensor at a time, on the CPU)."""
    cuda = options.device == Device.cuda
    loss = options.output_loss
    if loss == LossPath.auto:
        loss = LossPath.logits if cuda else LossPath.chunked
    optimizer = options.optimizer
    if optimizer == Optimizer.auto:
        if not cuda:
            optimizer = Optimizer.for_loop
        elif options.clip and options.precision == Precision.bf16_mixed:
            optimizer = Optimizer.foreach
        else:
            optimizer = Optimizer.fused
    return StepSetup(
        batch=batch,
        seq_len=seq_len,
        precision=str(options.precision),  # a Precision, whose str() is its value
        output_loss=OutputLoss(loss.value),
        loss_chunk=options.loss_chunk,
        optimizer=OptimizerImpl(optimizer.value),
        optim=options.optim,
        muon_variant=options.muon_variant,
    )


def _sharded(options: PlanOptions) -> bool:
    return options.strategy in (Strategy.fsdp, Strategy.hsdp)


def _scale(options: PlanOptions) -> dict[str, float]:
    if not _sharded(options):
        return {}
    share = 1.0 / options.shard_group
    scale = {WEIGHTS: share, GRADIENTS: share, OPTIMIZER: share}
    if options.precision == Precision.bf16_mixed:
        scale[CASTS] = 0.0  # gathered in bf16: autocast finds bf16 weights
    return scale


def check_plannable(model: ModelConfig) -> None:
    kind = task_of_family(model.family)
    if not TASKS[kind].token_level:
        raise ConfigError(f"zoo-plan plans token-level tasks; model.family={model.family.value} trains {kind.value}")


def plan(model: ModelConfig, options: PlanOptions, batch: int | None = None) -> Plan:
    """The plan of `model` at `options` (micro-batch `batch`, default options.batch)."""
    check_plannable(model)
    refusal = optimizer_refusal(options.optim, options.run_shape(model.parametrization.value))
    if refusal is not None:
        raise ConfigError(refusal)
    batch = options.batch if batch is None else batch
    seq_len = planned_seq_len(model, options.seq_len, batch)
    step = simulate_step(model, step_setup(options, batch, seq_len), _scale(options))
    parts = {part: step.parts[part] for part in PARTS}
    if _sharded(options):
        gathered_dtype = 0.5 if options.precision == Precision.bf16_mixed else 1.0  # of the stored float32
        largest = max(step.layer_param_bytes, default=0)
        layers_in_flight = min(2, len(step.layer_param_bytes))
        parts[GATHERED] = int(gathered_dtype * (step.root_param_bytes + layers_in_flight * largest) + largest)
    if options.strategy == Strategy.ddp:
        parts[BUCKETS] = step.param_bytes
    return Plan(options=options, model=model, batch=batch, seq_len=seq_len, parts=parts, step=step)


def largest_micro_batch(model: ModelConfig, options: PlanOptions, cache: dict | None = None) -> tuple[int, dict]:
    """(b, plans): the largest micro-batch b whose plan fits options' device memory (0: not
    even one row), by simulating: a line through the last two plans guesses the next batch
    (memory grows about linearly in the batch) inside the bracket of batches known to fit and
    known not to, until plan(b) fits and plan(b + 1) does not. `plans`: every plan made, by
    batch (pass it back as `cache` to reuse them)."""
    plans = cache if cache is not None else {}

    def at(b: int) -> Plan:
        if b not in plans:
            plans[b] = plan(model, options, b)
        return plans[b]

    budget = options.usable_bytes
    if not at(1).fits:
        return 0, plans
    fit, over = 1, None  # the largest batch known to fit, the smallest known not to
    a, b = 1, 2
    while over is None or over - fit > 1:
        if fit >= LARGEST_BATCH:
            return LARGEST_BATCH, plans
        if at(b).fits:
            fit = max(fit, b)
        else:
            over = b if over is None else min(over, b)
        slope = max((at(b).total - at(a).total) / (b - a), 1.0)
        guess = b + math.floor((budget - at(b).total) / slope)
        upper = LARGEST_BATCH if over is None else over - 1
        a, b = b, min(max(guess, fit + 1), upper)
        if b == a:  # the guess repeats: look next to the bracket's edge instead
            b = fit + 1 if fit + 1 != a else upper
    return fit, plans
