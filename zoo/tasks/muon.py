"""Muon for the hidden layers' matrices and AdamW for every other parameter, as one optimizer.

Muon (Jordan et al. 2024; Liu et al. 2025) orthogonalises the momentum of a 2-D weight with a
Newton-Schulz iteration; its authors use it for the hidden matrices only (attention and FFN
projections) and AdamW for embeddings, the output head, norms and biases. Lightning steps one
optimizer per training step, so `MuonWithAdamW` is a `torch.optim.Optimizer` whose parameter
groups are those of a `torch.optim.Muon` followed by those of a `torch.optim.AdamW`, and whose
state is theirs: each step is torch's own arithmetic, the learning-rate schedule sets every
group's rate, and a checkpoint holds and restores both (exact resume)."""

from __future__ import annotations

import torch
from torch import nn

from zoo.models.sharding import layers


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


class MuonWithAdamW(torch.optim.Optimizer):
    """`muon_groups` stepped by torch.optim.Muon, `adamw_groups` by torch.optim.AdamW; every
    group is in `param_groups` (Muon's first), every parameter's state in `state`."""

    def __init__(self, muon_groups: list[dict], adamw_groups: list[dict], *, muon: dict, adamw: dict) -> None:
        self.muon = torch.optim.Muon(muon_groups, **muon)
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

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.muon.step()
        self.adamw.step()
        return loss


__all__ = ["MuonWithAdamW", "hidden_matrices"]
