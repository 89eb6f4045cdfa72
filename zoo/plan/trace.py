"""One training step of a zoo model run on fake tensors (`FakeTensorMode`: shapes, dtypes and
the CPU's kernel choices, no memory), with every tensor storage followed from its allocation to
its release: the bytes alive at the step's peak, by what holds them.

The model is zoo's own (`zoo.models.build_model`), its loss the task's (`token_loss`, chunked
or whole logits), its optimizer zoo's (`zoo.tasks.optim.build_optimizer`: AdamW, or the plan's
`optim`), so a new layer
kind, position scheme or loss is counted as it runs, with no formula to keep in step. The
optimizer's state is made first (an update from zero gradients), and the step traced is the
steady state, whose peak is reported. Each storage is counted in one part: weights and buffers
as the model holds them, a gradient from the moment backward hands it to its parameter, AdamW's moments, bf16 copies of
weights that autocast makes, and the rest by what made it (the stack's forward and backward:
activations and their gradients; the output head and loss: logits and loss).

The mixture-of-experts layers (`zoo.nn.moe`) are also followed by what allocated inside them
in the forward (`StepMemory.moe`): the router's scores and choices, the dispatch buffers (the
sorted slots, each slot's gathered token, the weighted outputs and their sum), the experts'
hidden activations (routed and shared); and the expert weights. These are part of the
activations and weights above, not added to them; the loop over experts is given an even split
of the slots (a balanced, dropless step: no values to route by).

Values are never read: a host read (`bool(mask.all())`, `int(x.max())`) answers true / 1 and
`nonzero` answers none, which is what a batch without padding and with finite losses gives.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from zoo.config.facts.families import FAMILY_FACTS
from zoo.config.facts.muon import MuonVariant
from zoo.config.facts.optimizers import read_by
from zoo.config.facts.tasks import task_of_family
from zoo.config.schema.model import ModelConfig
from zoo.config.schema.task import OutputLoss
from zoo.config.schema.train import OptimConfig, OptimizerImpl, OptimizerKind
from zoo.models import build_model
from zoo.models.sharding import layers
from zoo.nn.chunked_loss import STEADY_CHUNKS, first_chunks_only
from zoo.nn.moe import MoE, moe_layers
from zoo.tasks import TASKS
from zoo.tasks.muon import Muon
from zoo.tasks.optim import build_optimizer

aten = torch.ops.aten

MLM_RATE = 0.15  # rows with a target in a masked-LM batch (Devlin et al. 2019), as zoo's collator masks

# the parts of a step's memory, in the order a plan prints them
WEIGHTS, BUFFERS, GRADIENTS, OPTIMIZER = "weights", "buffers", "gradients", "optimizer state"
ACTIVATIONS, LOSS, CASTS = "activations", "logits and loss", "bf16 weight copies"
# what Muon's update of one matrix makes (its momentum-corrected update, the orthogonalising
# iteration's work): whole matrices on every rank, sharded or not (`zoo.config.facts.muon`)
MUON_WORK = "Muon's whole matrices"
PARTS = (WEIGHTS, BUFFERS, GRADIENTS, OPTIMIZER, MUON_WORK, CASTS, ACTIVATIONS, LOSS)
# what the mixture-of-experts layers hold at the peak (of the weights and activations above)
EXPERT_WEIGHTS, ROUTER, DISPATCH, EXPERT_ACTIVATIONS = (
    "expert weights",
    "router activations",
    "dispatch buffers",
    "expert activations",
)
MOE_PARTS = (EXPERT_WEIGHTS, ROUTER, DISPATCH, EXPERT_ACTIVATIONS)

# what was running when a storage was allocated
_FORWARD, _LOSS, _BACKWARD, _UPDATE, _SETUP = "forward", "loss", "backward", "update", "setup"
_PHASE_PART = {_FORWARD: ACTIVATIONS, _LOSS: LOSS, _BACKWARD: ACTIVATIONS, _UPDATE: OPTIMIZER, _SETUP: ACTIVATIONS}


@dataclass(kw_only=True)
class StepSetup:
    """What one device runs: the micro-batch, precision and kernels."""

    batch: int
    seq_len: int
    precision: str  # 32-true, bf16-mixed or bf16-true
    output_loss: OutputLoss  # chunked or logits (resolved, not auto)
    loss_chunk: int = 1024
    optimizer: OptimizerImpl = OptimizerImpl.for_loop  # resolved, not auto
    optim: OptimizerKind = OptimizerKind.adamw  # optim.kind: whose state the update makes
    muon_variant: MuonVariant = MuonVariant.muon  # optim.muon_variant, read under optim=muon


@dataclass(kw_only=True)
class StepMemory:
    """Bytes alive at the step's peak by part, and the parameter facts a sharded plan needs
    (bytes in the parameters' own dtype)."""

    parts: dict[str, int]
    peak: int
    layer_param_bytes: list[int]  # each transformer layer's parameters
    root_param_bytes: int  # everything else: embeddings, position tables, final norms, head
    param_bytes: int
    param_count: int
    peak_phase: str  # forward, loss, backward or update
    moe: dict[str, int] = field(default_factory=dict)  # MOE_PARTS at the peak, for a model with mixture layers


class _Trace(TorchDispatchMode):
    """Follows every storage an operation returns until it is released (a weak reference's
    callback), each counted in one part; the peak is that of the parts' bytes weighed by
    `scale` (a sharded plan weighs weights, gradients and moments by 1 / shards). Host reads
    are answered without values."""

    def __init__(self, scale: dict[str, float]) -> None:
        super().__init__()
        self.scale = scale
        self.live: dict[int, list] = {}  # id(storage) -> [bytes, part]
        self.sums = dict.fromkeys(PARTS, 0)
        self.now = self.peak = 0.0
        self.at_peak = dict(self.sums)
        self.peak_phase = _SETUP
        self.phase = _SETUP
        self.param_storages: set[int] = set()
        self.region: str | None = None  # the part of a mixture layer running now (set by hooks)
        self.part: str | None = None  # the part of what is made now, when not the phase's (Muon's update)
        self.regions = dict.fromkeys(MOE_PARTS[1:], 0)  # forward storages alive, by the region that made them
        self.regions_at_peak = dict(self.regions)

    def _release(self, key: int) -> None:
        n, part, region = self.live.pop(key)
        self.sums[part] -= n
        self.now -= n * self.scale.get(part, 1.0)
        if region is not None:
            self.regions[region] -= n

    def add(self, t: torch.Tensor, part: str) -> None:
        storage = t.untyped_storage()
        key = id(storage)
        if key in self.live:
            return
        n = storage.nbytes()
        region = self.region if self.phase == _FORWARD else None
        self.live[key] = [n, part, region]
        self.sums[part] += n
        if region is not None:
            self.regions[region] += n
        self.now += n * self.scale.get(part, 1.0)
        weakref.finalize(storage, self._release, key)

    def retag(self, t: torch.Tensor, part: str) -> None:
        """Count `t`'s storage in `part` from now on (a gradient backward made, AdamW's moments)."""
        entry = self.live.get(id(t.untyped_storage()))
        if entry is None or entry[1] == part:
            return
        n, before, _ = entry
        self.sums[before] -= n
        self.sums[part] += n
        self.now += n * (self.scale.get(part, 1.0) - self.scale.get(before, 1.0))
        entry[1] = part

    def restart(self) -> None:
        self.peak, self.at_peak, self.peak_phase = self.now, dict(self.sums), self.phase
        self.regions_at_peak = dict(self.regions)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is aten._local_scalar_dense.default:
            return True if args[0].dtype == torch.bool else 1
        if func is aten.nonzero.default:
            return torch.empty((0, args[0].dim()), dtype=torch.long, device=args[0].device)
        out = func(*args, **kwargs)
        cast = (
            func is aten._to_copy.default
            and isinstance(args[0], torch.Tensor)
            and id(args[0].untyped_storage()) in self.param_storages
        )
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.add(t, CASTS if cast else self.part or _PHASE_PART[self.phase])
        if self.now > self.peak:
            self.peak, self.at_peak, self.peak_phase = self.now, dict(self.sums), self.phase
            self.regions_at_peak = dict(self.regions)
        return out


@contextlib.contextmanager
def _phase(trace: _Trace, phase: str) -> Iterator[None]:
    trace.phase = phase
    try:
        yield
    finally:
        trace.phase = _SETUP


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """bf16-true: tensors made in forward are bf16, as Lightning's true-precision plugin sets."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def _batch(model: ModelConfig, B: int, T: int) -> tuple[dict, torch.Tensor]:
    """The family's forward arguments without padding (the data path leaves a full mask out)
    and labels (B, T)."""
    ids = torch.zeros(B, T, dtype=torch.long)  # (B, T)
    if FAMILY_FACTS[model.family].cross_attention:
        return {"input_ids": ids, "decoder_input_ids": torch.zeros(B, T, dtype=torch.long)}, ids
    return {"input_ids": ids}, ids


def _forward_loss(
    model, inputs: dict, labels: torch.Tensor, setup: StepSetup, sparse: bool, trace: _Trace
) -> torch.Tensor:
    """`ZooModel.forward_loss` in two phases (stack, then head and loss); a sparse-target task
    sends MLM_RATE of the rows to the head, as `token_loss` selects them."""
    with _phase(trace, _FORWARD):
        hidden = model(**inputs, return_logits=False).hidden_states  # (B, T, D)
        if hidden.requires_grad:  # backward: the head's and loss's gradients first, then the stack's
            hidden.register_hook(lambda grad: setattr(trace, "phase", _BACKWARD))
        rows, targets = hidden.reshape(-1, hidden.shape[-1]), labels.reshape(-1)  # (B·T, D), (B·T,)
    with _phase(trace, _LOSS):
        if sparse:
            keep = torch.arange(max(1, round(MLM_RATE * targets.numel())))  # (n,)
            rows, targets = rows.index_select(0, keep), targets.index_select(0, keep)  # (n, D), (n,)
        return model.token_loss(
            rows, targets, chunk=setup.loss_chunk, output_loss=setup.output_loss, sparse_targets=sparse
        )


def _step(model, optimizer, inputs, labels, setup: StepSetup, sparse: bool, trace: _Trace) -> None:
    model.train()
    mixed = setup.precision == "bf16-mixed"
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if mixed else contextlib.nullcontext()
    true_bf16 = _default_dtype(torch.bfloat16) if setup.precision == "bf16-true" else contextlib.nullcontext()
    with autocast, true_bf16:
        loss = _forward_loss(model, inputs, labels, setup, sparse, trace)
    with _phase(trace, _LOSS):
        loss.backward()
        del loss
    with _phase(trace, _UPDATE):
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def _make_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, trace: _Trace) -> None:
    """The optimizer's state, as its first step makes it: an update from zero gradients. No
    forward or backward is traced for it: the state's tensors follow the parameters alone (half
    of what a plan costs to make, with the same plan: a traced first step gave the same parts)."""
    for p in model.parameters():
        if p.requires_grad:
            p.grad = torch.zeros_like(p)
    with _phase(trace, _UPDATE):
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def _storage_keys(tensors) -> set[int]:
    return {id(t.untyped_storage()) for t in tensors if isinstance(t, torch.Tensor)}


def _param_bytes(module: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


def _follow_mixtures(model: torch.nn.Module, trace: _Trace) -> list[MoE]:
    """Hooks that tell `trace` which part of a mixture layer is running: its router, its experts
    (routed and shared), or the dispatch around them."""

    def enter(region: str | None):
        return lambda *args: setattr(trace, "region", region)

    layers = moe_layers(model)
    for layer in layers:
        layer.register_forward_pre_hook(enter(DISPATCH))
        layer.register_forward_hook(enter(None))
        units = [(layer.router, ROUTER), (layer.experts, EXPERT_ACTIVATIONS)]
        units += [(layer.shared, EXPERT_ACTIVATIONS)] if layer.shared is not None else []
        for unit, region in units:
            unit.register_forward_pre_hook(enter(region))
            unit.register_forward_hook(enter(DISPATCH))
    return layers


def _follow_muon(optimizer: torch.optim.Optimizer, trace: _Trace) -> None:
    """Count what Muon's update of each matrix makes as MUON_WORK (its state, made at the first
    step, is counted as the optimizer's state afterwards). Under sharding a rank gathers each
    matrix's update whole and orthogonalises it whole, so this part is not divided by the shards;
    a single process's trace holds the whole update where a rank holds its rows and the gathered
    copy, so it is short by that rank's rows of one matrix."""
    inner = getattr(optimizer, "muon", optimizer)
    if not isinstance(inner, Muon):
        return
    update = inner._update

    def counted(p: torch.Tensor, group: dict) -> None:
        trace.part = MUON_WORK
        try:
            update(p, group)
        finally:
            trace.part = None

    inner._update = counted  # type: ignore[method-assign]  # this optimizer only, made for the trace


def simulate_step(
    model_cfg: ModelConfig,
    setup: StepSetup,
    scale: dict[str, float] | None = None,
    chunks: int | None = STEADY_CHUNKS,
) -> StepMemory:
    """The bytes one device holds at the peak of a steady-state training step (AdamW's moments
    already made) of `model_cfg` at `setup`, by part. `scale`: a weight per part (default 1)
    with which the peak is found, e.g. 1 / shards for weights, gradients and moments under
    FSDP (the returned parts are then the shares one device holds). `chunks`: the chunked
    loss's loop is traced for its first `chunks` chunks only (`first_chunks_only`: the same
    peak, far fewer operations at a large batch; None: every chunk)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    scale = dict(scale or {})
    kind = task_of_family(model_cfg.family)
    sparse = TASKS[kind].sparse_targets
    trace = _Trace(scale)
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    true_bf16 = _default_dtype(torch.bfloat16) if setup.precision == "bf16-true" else contextlib.nullcontext()
    with fake, true_bf16:  # bf16-true: made in bf16, as Lightning's true-precision plugin makes a model
        model = build_model(model_cfg, init_seed=0)  # a seed of its own: no value is drawn from a fake tensor
    mixtures = _follow_mixtures(model, trace)
    with fake, trace, first_chunks_only(chunks) if chunks else contextlib.nullcontext():
        params = list(model.parameters())
        for p in params:
            trace.add(p, WEIGHTS)
        for b in model.buffers():
            trace.add(b, BUFFERS)
        trace.param_storages = _storage_keys(params)
        # nn.Linear's weight is a Parameter (torch's stub says Tensor)
        head = cast(torch.nn.Parameter, model.lm_head.weight) if model.lm_head is not None else None
        # the settings the optimizer's row reads (an optimizer without kernels takes no implementation)
        optim = OptimConfig(
            **read_by(setup.optim, {"implementation": setup.optimizer, "muon_variant": setup.muon_variant})
        )
        optimizer = build_optimizer(model, optim, output_embedding=head)
        _follow_muon(optimizer, trace)
        for p in params:  # a gradient is counted as one from the moment backward hands it over
            p.register_post_accumulate_grad_hook(lambda p: trace.retag(p.grad, GRADIENTS))
        inputs, labels = _batch(model_cfg, setup.batch, setup.seq_len)
        _make_state(model, optimizer, trace)
        for state in optimizer.state.values():
            for t in state.values():
                if isinstance(t, torch.Tensor):
                    trace.retag(t, OPTIMIZER)
        trace.restart()
        _step(model, optimizer, inputs, labels, setup, sparse, trace)  # the steady state
        parts = {part: int(n * scale.get(part, 1.0)) for part, n in trace.at_peak.items()}
        layer_bytes = [_param_bytes(layer) for layer in layers(model)]
        total = _param_bytes(model)
        moe = {}
        if mixtures:
            experts = sum(
                _param_bytes(m.experts) + (_param_bytes(m.shared) if m.shared is not None else 0) for m in mixtures
            )
            moe = {EXPERT_WEIGHTS: int(experts * scale.get(WEIGHTS, 1.0)), **trace.regions_at_peak}
        return StepMemory(
            parts=parts,
            peak=int(trace.peak),
            layer_param_bytes=layer_bytes,
            root_param_bytes=total - sum(layer_bytes),
            param_bytes=total,
            param_count=sum(p.numel() for p in params),
            peak_phase=trace.peak_phase,
            moe=moe,
        )
