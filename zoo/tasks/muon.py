"""Muon for the hidden layers' matrices and AdamW for every other parameter, as one optimizer.

Muon (Jordan et al. 2024; Liu et al. 2025) orthogonalises the momentum of a 2-D weight with a
Newton-Schulz iteration; its authors use it for the hidden matrices only (attention and FFN
projections) and AdamW for embeddings, the output head, norms and biases. Lightning steps one
optimizer per training step, so `MuonWithAdamW` is a `torch.optim.Optimizer` whose parameter
groups are those of a `Muon` followed by those of a `torch.optim.AdamW`, and whose state is
theirs: the learning-rate schedule sets every group's rate, and a checkpoint holds and restores
both (exact resume).

`Muon` is torch.optim.Muon with the options of `zoo.config.facts.muon` as group keys: its
default steps as torch's does, bit for bit; NorMuon adds a float32 second moment per row; a
sharded matrix (FSDP2's DTensor, over one mesh dimension or HSDP's two) has its update gathered
whole for the iteration, and each rank keeps its rows of the result (the facts module says why)."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.distributed.tensor import DTensor, Replicate

from zoo.config.facts.muon import NORMUON_BETA2, MuonVariant, NsMethod, NsPrecision
from zoo.models.sharding import layers
from zoo.tasks.orthogonalise import orthogonalise

ROW_EPS = 1e-10  # NorMuon's reference code: the floor under each row's root mean square and the norm
# the group keys Muon adds to torch.optim.Muon's, with their defaults: a checkpoint written before
# they existed ran with these
OPTIONS = {
    "muon_variant": MuonVariant.muon.value,
    "ns_method": NsMethod.quintic.value,
    "ns_precision": NsPrecision.bfloat16.value,
    "normuon_beta2": NORMUON_BETA2,
}


def hidden_matrices(module: nn.Module, output_embedding: torch.Tensor | None = None) -> set[int]:
    """ids of the weights Muon takes: the 2-D weights of `nn.Linear` layers inside the
    transformer layers of `module` (a model, or a task holding one as `.model`). A fused matrix
    (qkv_proj: q, k and v; a gated FFN's w_in: gate and up) is one parameter and is
    orthogonalised whole. Embedding tables, the output head (`output_embedding`, tied or not),
    a task's own heads, norms and biases are left to AdamW."""
    model = getattr(module, "model", module)
    out = set()
    for layer in layers(model):
        for sub in layer.modules():
            weight = getattr(sub, "weight", None)
            if (
                isinstance(sub, nn.Linear)
                and weight is not None
                and weight.ndim == 2
                and weight is not output_embedding
            ):
                out.add(id(weight))
    return out


def whole(t: torch.Tensor) -> torch.Tensor:
    """The whole matrix of `t`: a sharded DTensor gathered (an all-gather over its mesh), a plain
    tensor as it is."""
    return t.full_tensor() if isinstance(t, DTensor) else t


def rows_of(full: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`full`, held whole and equal on every rank, as `like` holds it: a DTensor of like's
    placements (this rank's rows: a local slice, no exchange), or `full` itself."""
    if not isinstance(like, DTensor):
        return full
    mesh = like.device_mesh
    replicated = DTensor.from_local(full, mesh, [Replicate()] * mesh.ndim, run_check=False)
    return replicated.redistribute(mesh, like.placements)


def shape_factor(adjust_lr_fn: str | None, shape: torch.Size) -> float:
    """torch.optim.Muon's `_adjust_lr` ratio for a matrix of `shape` (A, B): original
    sqrt(max(1, A / B)), match_rms_adamw 0.2 sqrt(max(A, B))."""
    a, b = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return math.sqrt(max(1, a / b))
    return 0.2 * math.sqrt(max(a, b))


class Muon(torch.optim.Muon):
    """torch.optim.Muon whose groups also carry `OPTIONS` (variant, iteration, its precision,
    NorMuon's beta2), stepping whole or sharded matrices."""

    def __init__(self, params, **options) -> None:
        ours = {key: options.pop(key, default) for key, default in OPTIONS.items()}
        super().__init__(params, **options)
        self.defaults.update(ours)
        self.fill_options()

    def fill_options(self) -> None:
        """Every group holds every key of `OPTIONS` (after a load of a checkpoint older than some)."""
        for group in self.param_groups:
            for key, value in OPTIONS.items():
                group.setdefault(key, self.defaults.get(key, value))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._update(p, group)
        return loss

    def _update(self, p: torch.Tensor, group: dict) -> None:
        """torch.optim.Muon's update of `p` (momentum, Nesterov, orthogonalisation, decoupled
        decay, the shape factor), its iteration and variant as `group` says."""
        state, grad = self.state[p], p.grad
        assert grad is not None  # step() updates the parameters that have one
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(grad, memory_format=torch.preserve_format)
        buf = state["momentum_buffer"]
        buf.lerp_(grad, 1 - group["momentum"])
        update = grad.lerp(buf, group["momentum"]) if group["nesterov"] else buf
        ortho = orthogonalise(
            whole(update), NsMethod(group["ns_method"]), group["ns_steps"], NsPrecision(group["ns_precision"])
        )  # (A, B), whole on every rank
        if group["muon_variant"] == MuonVariant.normuon.value:
            ortho = self._normalise_rows(p, ortho, group["normuon_beta2"])
        lr = float(group["lr"])
        p.mul_(1 - lr * group["weight_decay"])
        p.add_(rows_of(ortho, p), alpha=-lr * shape_factor(group["adjust_lr_fn"], p.shape))

    def _normalise_rows(self, p: torch.Tensor, ortho: torch.Tensor, beta2: float) -> torch.Tensor:
        """NorMuon (Li et al. 2025): each row of `ortho` (A, B) divided by the root of v, the EMA
        of its mean square (state `row_second_moment`, (A, 1) float32, sharded as `p`), then the
        whole scaled back to `ortho`'s Frobenius norm."""
        state = self.state[p]
        if "row_second_moment" not in state:
            zeros = torch.zeros(p.shape[0], 1, dtype=torch.float32, device=ortho.device)  # (A, 1)
            state["row_second_moment"] = rows_of(zeros, p)
        held = state["row_second_moment"]
        ortho = ortho.float()
        second = whole(held).lerp((ortho * ortho).mean(dim=1, keepdim=True), 1 - beta2)  # (A, 1)
        held.copy_(rows_of(second, held))
        norm = ortho.norm()
        normalised = ortho / (second.sqrt() + ROW_EPS)
        return normalised * (norm / (normalised.norm() + ROW_EPS))


class MuonWithAdamW(torch.optim.Optimizer):
    """`muon_groups` stepped by `Muon`, `adamw_groups` by torch.optim.AdamW; every
    group is in `param_groups` (Muon's first), every parameter's state in `state`."""

    def __init__(self, muon_groups: list[dict], adamw_groups: list[dict], *, muon: dict, adamw: dict) -> None:
        self.muon = Muon(muon_groups, **muon)
        self.adamw = torch.optim.AdamW(adamw_groups, **adamw)
        self._muon_groups = len(self.muon.param_groups)
        # the groups already hold every default of their own optimizer: none to add here
        super().__init__(self.muon.param_groups + self.adamw.param_groups, defaults={})
        self._share()

    def _share(self) -> None:
        """Point both inner optimizers at this optimizer's groups and state (after a load, which
        replaces both)."""
        self.muon.param_groups = self.param_groups[: self._muon_groups]
        self.adamw.param_groups = self.param_groups[self._muon_groups :]
        self.muon.state = self.adamw.state = self.state

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self._share()
        # AdamW's own load keeps its step counters float32 tensors (its `__setstate__`)
        self.adamw.__setstate__({"state": self.state, "param_groups": self.adamw.param_groups})
        self._share()
        self.muon.fill_options()

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.muon.step()
        self.adamw.step()
        return loss


__all__ = ["Muon", "MuonWithAdamW", "hidden_matrices", "rows_of", "whole"]
