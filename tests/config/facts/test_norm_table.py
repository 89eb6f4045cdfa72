"""The norm-type table (`zoo.config.facts.norms.NORM_FACTS`) agrees with the modules it
describes: every kind has a row, a builder in `zoo.nn.norm.NORMS` and a config file; the
parameters a row says one norm holds are the built module's, with and without model.bias; zoo's
RMSNorm computes what torch's RMSNorm computes in float32, and what `zoo-train` composes from
`model/norm_type=KIND` is the kind."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

import zoo
from tests.conftest import NORM_TYPES, tiny
from zoo.config import ModelConfig, NormType
from zoo.config.facts.norms import NORM_FACTS, norm_parameters
from zoo.nn.norm import NORM_MODULES, NORMS, RMSNorm, build_norm

CONF = Path(__file__).resolve().parents[3] / "conf" / "model" / "norm_type"
KINDS = list(NormType)


def test_every_kind_has_a_row_a_builder_and_a_config_file():
    assert list(NORM_FACTS) == KINDS and NORM_TYPES == [k.value for k in KINDS]
    assert set(NORMS) == set(KINDS)
    assert {p.stem for p in CONF.glob("*.yaml")} == {k.value for k in KINDS}


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_a_rows_parameters_are_what_its_module_holds(kind, bias):
    for D in (1, 16, 24):
        norm = build_norm(kind, D, 1e-5, bias)
        assert isinstance(norm, NORM_MODULES)
        assert sum(p.numel() for p in norm.parameters()) == NORM_FACTS[kind].parameters(D, bias)
    cfg = ModelConfig(**tiny(norm_type=kind.value, bias=bias))
    assert norm_parameters(cfg) == NORM_FACTS[kind].parameters(16, bias)


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_a_built_model_starts_its_norms_at_one_and_zero(kind):
    model = zoo.build_model(ModelConfig(**tiny(norm_type=kind.value)))
    norms = [m for m in model.modules() if isinstance(m, NORM_MODULES)]
    assert norms and all(torch.equal(m.weight, torch.ones_like(m.weight)) for m in norms)
    assert all(torch.equal(m.bias, torch.zeros_like(m.bias)) for m in norms if getattr(m, "bias", None) is not None)


def _normalized_then_scaled(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm as Hugging Face's Llama computes it: normalized in float32, cast back, times γ."""
    h = x.float()
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def test_zoos_rmsnorm_is_torchs_and_computes_the_same_in_float32():
    norm = RMSNorm(24, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_()
    x = torch.randn(3, 5, 24) * 4
    assert isinstance(norm, torch.nn.RMSNorm) and norm.state_dict().keys() == {"weight"}
    assert torch.equal(norm(x), _normalized_then_scaled(x, norm.weight, 1e-6))
    assert torch.equal(norm(x), torch.nn.functional.rms_norm(x, (24,), norm.weight, 1e-6))


def test_in_bfloat16_zoos_rmsnorm_keeps_its_own_order_which_torchs_kernel_does_not_compute():
    norm = RMSNorm(64, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_()
    x = (torch.randn(4, 32, 64) * 3).bfloat16()
    assert torch.equal(norm(x), _normalized_then_scaled(x, norm.weight, 1e-6))  # float32 γ: float32 out
    norm = norm.bfloat16()
    ours, torchs = norm(x), torch.nn.functional.rms_norm(x, (64,), norm.weight, 1e-6)
    assert torch.equal(ours, _normalized_then_scaled(x, norm.weight, 1e-6))
    assert not torch.equal(ours, torchs)  # torch rounds once, after γ: a different number


def test_a_checkpoint_of_the_former_rmsnorm_loads():
    old = {"weight": torch.randn(16)}  # the former nn.Module's only entry
    norm = RMSNorm(16)
    norm.load_state_dict(old)
    assert torch.equal(norm.weight, old["weight"])


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_the_config_file_and_the_override_compose_the_kind(kind):
    values = yaml.safe_load((CONF / f"{kind.value}.yaml").read_text())
    assert values == {"model": {"norm_type": kind.value}}
    for override in (f"model/norm_type={kind.value}", f"model.norm_type={kind.value}"):
        for base in ("model=gpt", "model=llama"):
            assert zoo.compose([base, override]).model.norm_type == kind.value


def test_every_row_says_what_it_is_and_cites_its_source():
    assert all(NORM_FACTS[k].what and NORM_FACTS[k].paper and NORM_FACTS[k].flops_per_element > 0 for k in KINDS)
