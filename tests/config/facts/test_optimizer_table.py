"""The optimizer table (`zoo.config.facts.optimizers.OPTIMIZER_FACTS`) agrees with the optimizers
it describes: every kind has a row, a builder and a config file; a key a row reads changes the
optimizer it builds, a key it does not read is refused; the state a step leaves is the row's
numbers per parameter, which the host-memory check and the planner count; Muon takes exactly the
hidden layers' matrices and steps them as torch's own Muon does, the rest as torch's AdamW; and
its refusals hold on one line."""

from __future__ import annotations

import copy
from dataclasses import fields
from pathlib import Path

import pytest
import torch

import zoo
from tests.conftest import FAMILIES, tiny
from zoo.config import ConfigError, ModelConfig
from zoo.config.facts.ema import EMA_KEYS
from zoo.config.facts.optimizers import OPTIMIZER_FACTS, OptimizerKind, optimizer_readers
from zoo.config.schema.params import parameter_parts
from zoo.config.schema.train import OptimConfig
from zoo.tasks.muon import OPTIONS, MuonWithAdamW, hidden_matrices
from zoo.tasks.optim import OPTIMIZERS, build_optimizer
from zoo.training import machine

CONF = Path(__file__).resolve().parents[3] / "conf" / "optim"
KINDS = list(OptimizerKind)
# the weights' average (optim.ema*) is every kind's, kept beside the optimizer: tests/training/test_ema.py
KEYS = [f.name for f in fields(OptimConfig) if f.name != "kind" and f.name not in EMA_KEYS]
CHANGED = {
    "lr": 2e-3,
    "weight_decay": 0.03,
    "betas": [0.8, 0.9],
    "eps": 1e-6,
    "implementation": "foreach",
    "muon_lr": 0.02,
    "momentum": 0.9,
    "nesterov": False,
    "ns_steps": 3,
    "adjust_lr_fn": "original",
    "muon_variant": "normuon",
    "ns_method": "polar_express",
    "ns_precision": "float32",
    "normuon_beta2": 0.5,
}
# a key read only beside another's value: both configs of a comparison hold it
BESIDE = {"normuon_beta2": {"muon_variant": "normuon"}}


def _model(**overrides):
    return zoo.build_model(tiny(**overrides))


def _head(model):
    return model.lm_head.weight if model.lm_head is not None else None


def _steps(model, optimizer, n: int = 2) -> None:
    torch.manual_seed(1)
    for _ in range(n):
        ids = torch.randint(0, 37, (2, 8))
        model(ids).logits.float().square().mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def test_every_kind_has_a_row_a_builder_and_a_config_file():
    assert list(OPTIMIZER_FACTS) == KINDS
    assert list(OPTIMIZERS) == KINDS
    assert {p.stem for p in CONF.glob("*.yaml")} >= {k.value for k in KINDS}
    assert set(CHANGED) == set(KEYS)  # a new key gets a changed value here, and a reader in a row
    assert all(optimizer_readers(key) for key in KEYS)


@pytest.mark.parametrize("kind, key", [(k, key) for k in KINDS for key in OPTIMIZER_FACTS[k].params], ids=str)
def test_a_key_a_row_reads_changes_what_its_optimizer_does(kind, key):
    """The weights after two steps differ when the key differs (implementation: the same
    arithmetic by other kernels, so the group records it instead)."""
    out = []
    beside = BESIDE.get(key, {})
    for cfg in (OptimConfig(kind=kind, **beside), OptimConfig(kind=kind, **beside, **{key: CHANGED[key]})):
        torch.manual_seed(0)
        model = _model()
        optimizer = build_optimizer(model, cfg, output_embedding=_head(model))
        if key == "implementation":
            out.append([g.get("foreach") for g in optimizer.param_groups])
            continue
        _steps(model, optimizer)
        out.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert not (out[0] == out[1] if key == "implementation" else torch.equal(out[0], out[1]))


@pytest.mark.parametrize(
    "kind, key", [(k, key) for k in KINDS for key in KEYS if key not in OPTIMIZER_FACTS[k].params], ids=str
)
def test_a_key_the_row_does_not_read_is_refused(kind, key):
    with pytest.raises(ConfigError, match=f"optim.{key} only applies to optim="):
        OptimConfig(kind=kind, **{key: CHANGED[key]})


def test_an_unknown_kind_is_refused():
    with pytest.raises(ConfigError, match="optim.kind='lion' is not allowed"):
        OptimConfig(kind="lion")


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_the_state_a_step_leaves_is_the_rows_numbers_per_parameter(subtests, kind):
    """On a model of each family (a subtest each), one step leaves the state the row counts."""
    for family in FAMILIES:
        with subtests.test(family):
            assert_state_is_the_rows(kind, family)


def assert_state_is_the_rows(kind, family):
    model = _model(family=family)
    optimizer = build_optimizer(model, OptimConfig(kind=kind), output_embedding=_head(model))
    loss = sum(p.float().square().sum() for p in model.parameters())
    loss.backward()
    optimizer.step()
    hidden = hidden_matrices(model, _head(model))
    row = OPTIMIZER_FACTS[kind]
    expected = sum(p.numel() * row.state_per_parameter(id(p) in hidden) for p in model.parameters())
    held = sum(t.numel() for state in optimizer.state.values() for name, t in state.items() if name != "step")
    assert held == expected
    assert bool(hidden) and all(p.ndim == 2 for p in model.parameters() if id(p) in hidden)


def test_the_host_memory_check_weighs_the_rows_state():
    cfg = ModelConfig(**tiny())
    parts = parameter_parts(cfg)
    assert machine.STACK in parts  # the stack's parameters are the hidden matrices Muon takes
    adamw = sum(n * machine.bytes_per_parameter(OptimizerKind.adamw, p == machine.STACK) for p, n in parts.items())
    muon = sum(n * machine.bytes_per_parameter(OptimizerKind.muon, p == machine.STACK) for p, n in parts.items())
    assert adamw == 16 * sum(parts.values())
    assert muon == adamw - 4 * parts[machine.STACK]


@pytest.mark.parametrize("family", FAMILIES)
def test_muon_takes_the_hidden_layers_matrices_and_nothing_else(subtests, family):
    """With a plain and a gated feed-forward unit (a subtest each)."""
    for unit, ffn in (("dense", {}), ("gated", {"activation": "swiglu"})):
        with subtests.test(unit):
            assert_muon_takes_the_hidden_matrices(family, ffn)


def assert_muon_takes_the_hidden_matrices(family, ffn):
    model = _model(family=family, tie_embeddings=False, **ffn)
    hidden = hidden_matrices(model, _head(model))
    names = {n for n, p in model.named_parameters() if id(p) in hidden}
    assert names and all(
        ".layers." in n and n.endswith("_proj.weight") or n.endswith(("w_in.weight", "w_out.weight")) for n in names
    ), names
    assert not any("embed" in n or "lm_head" in n or "norm" in n or n.endswith("bias") for n in names)
    matrices = {n for n, p in model.named_parameters() if p.ndim == 2 and ".layers." in n and "norm" not in n}
    tables = {n for n in matrices if "embed" in n or "relative" in n or "position" in n}
    assert names == matrices - tables


def test_muon_with_adamw_steps_as_torchs_muon_and_adamw_apart(tmp_path):
    """The composite's weights after three steps are bit for bit those of torch.optim.Muon on the
    hidden matrices and torch.optim.AdamW on the rest, each stepped on its own (torch's code)."""
    cfg = OptimConfig(kind="muon", lr=2e-3, muon_lr=0.01, weight_decay=0.05, implementation="for_loop")
    torch.manual_seed(0)
    ours = _model(activation="swiglu")
    theirs = copy.deepcopy(ours)
    optimizer = build_optimizer(ours, cfg, output_embedding=_head(ours))
    assert isinstance(optimizer, MuonWithAdamW)
    hidden = hidden_matrices(theirs, _head(theirs))
    decays = {id(p) for m in theirs.modules() if isinstance(m, torch.nn.Linear) for p in [m.weight]}
    rest = [p for p in theirs.parameters() if id(p) not in hidden]
    muon = torch.optim.Muon(
        [p for p in theirs.parameters() if id(p) in hidden], lr=0.01, weight_decay=0.05, adjust_lr_fn="match_rms_adamw"
    )
    head = _head(theirs)
    adamw = torch.optim.AdamW(
        [
            {"params": [p for p in rest if id(p) in decays and p is not head], "weight_decay": 0.05},
            {"params": [p for p in rest if id(p) not in decays or p is head], "weight_decay": 0.0},
        ],
        lr=2e-3,
        betas=(0.9, 0.95),
        eps=1e-8,
        foreach=False,
    )

    class Both:
        def step(self):
            muon.step()
            adamw.step()

        def zero_grad(self, set_to_none=True):
            muon.zero_grad(set_to_none)
            adamw.zero_grad(set_to_none)

    _steps(ours, optimizer, 3)
    _steps(theirs, Both(), 3)
    for (name, a), b in zip(ours.named_parameters(), theirs.parameters()):
        assert torch.equal(a, b), name


def test_muons_state_survives_a_save_and_load_exactly():
    """A state_dict loaded into a fresh MuonWithAdamW continues as the original would."""
    torch.manual_seed(0)
    model = _model()
    again = copy.deepcopy(model)
    cfg = OptimConfig(kind="muon")
    first = build_optimizer(model, cfg, output_embedding=_head(model))
    _steps(model, first, 2)
    saved = copy.deepcopy(first.state_dict())
    again.load_state_dict(model.state_dict())
    second = build_optimizer(again, cfg, output_embedding=_head(again))
    second.load_state_dict(saved)
    assert second.muon.state is second.state and second.adamw.param_groups[0] is second.param_groups[1]
    _steps(model, first, 2)
    _steps(again, second, 2)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))


def test_a_muon_state_from_before_its_options_steps_at_their_defaults():
    """A checkpoint written before optim.muon_variant, ns_method, ns_precision and normuon_beta2
    existed (its Muon groups hold none of them) loads with their defaults, which it ran with, and
    continues as the original would."""
    torch.manual_seed(0)
    model = _model()
    again = copy.deepcopy(model)
    first = build_optimizer(model, OptimConfig(kind="muon"), output_embedding=_head(model))
    _steps(model, first, 2)
    saved = copy.deepcopy(first.state_dict())
    for key in OPTIONS:
        del saved["param_groups"][0][key]
    again.load_state_dict(model.state_dict())
    second = build_optimizer(again, OptimConfig(kind="muon"), output_embedding=_head(again))
    second.load_state_dict(saved)
    assert {key: second.param_groups[0][key] for key in OPTIONS} == OPTIONS
    _steps(model, first, 2)
    _steps(again, second, 2)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))
