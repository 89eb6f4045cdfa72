"""The activation table (`zoo.config.facts.activations.ACTIVATION_FACTS`) agrees with the
functions it describes: every kind has a row, a function in `zoo.nn.feedforward.ACTIVATIONS`
and a config file; each function computes its textbook formula (written here from the papers,
not from torch); a gated row's unit is act(x W_gate) ⊙ (x W_up) and takes 8/3·D by default,
and what `zoo-train` composes from `model/activation=KIND` is the kind."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml

import zoo
from tests.conftest import ACTIVATIONS as ACTIVATION_NAMES
from tests.conftest import tiny
from zoo.config import Activation, ModelConfig
from zoo.config.facts.activations import ACTIVATION_FACTS, GATED
from zoo.nn.feedforward import ACTIVATIONS, FeedForward

CONF = Path(__file__).resolve().parents[3] / "conf" / "model" / "activation"
KINDS = list(Activation)


def _gelu(x):  # x Φ(x), Hendrycks & Gimpel 2016
    return x * 0.5 * (1 + torch.erf(x / math.sqrt(2)))


def _gelu_tanh(x):  # their tanh approximation
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


FORMULAS = {  # (function, approximate) -> the formula
    ("relu", "none"): lambda x: x.clamp(min=0),
    ("gelu", "none"): _gelu,
    ("gelu", "tanh"): _gelu_tanh,
    ("silu", "none"): lambda x: x / (1 + torch.exp(-x)),  # Swish-1 (Ramachandran et al. 2017)
}


def test_every_kind_has_a_row_a_function_and_a_config_file():
    assert list(ACTIVATION_FACTS) == KINDS and ACTIVATION_NAMES == [k.value for k in KINDS]
    assert set(ACTIVATIONS) == set(KINDS)
    assert {p.stem for p in CONF.glob("*.yaml")} == {k.value for k in KINDS}
    assert GATED == tuple(k for k in KINDS if ACTIVATION_FACTS[k].gated)


def formula(kind: Activation):
    """The row's textbook formula, squared where the row says so (ReLU², So et al. 2021)."""
    facts = ACTIVATION_FACTS[kind]
    act = FORMULAS[facts.function, facts.approximate]
    return (lambda x: act(x) ** 2) if facts.squared else act


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_a_kinds_function_computes_its_rows_formula(kind):
    x = torch.linspace(-6, 6, 241, dtype=torch.float64)
    torch.testing.assert_close(ACTIVATIONS[kind](x), formula(kind)(x), rtol=1e-6, atol=1e-6)


def test_relu2_is_the_square_of_relu():
    x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 3.0])
    assert ACTIVATIONS[Activation.relu2](x).tolist() == [0.0, 0.0, 0.0, 0.25, 9.0]


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_a_unit_is_gated_as_its_row_says(kind):
    facts = ACTIVATION_FACTS[kind]
    unit = FeedForward(8, 12, kind, bias=True, dropout=0.0)
    x = torch.randn(2, 3, 8)
    h = x @ unit.w_in.weight.T + unit.w_in.bias  # (B, T, F or 2·F)
    act = formula(kind)
    h = act(h[..., :12]) * h[..., 12:] if facts.gated else act(h)
    torch.testing.assert_close(unit(x), h @ unit.w_out.weight.T + unit.w_out.bias, rtol=1e-5, atol=1e-6)
    assert unit.w_in.out_features == (24 if facts.gated else 12)
    d_ff = ModelConfig(**tiny(activation=kind.value, d_model=96)).d_ff
    assert d_ff == (256 if facts.gated else 384)  # 8/3·96 rounded up to 64, or 4·96


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_the_config_file_and_the_override_compose_the_kind(kind):
    values = yaml.safe_load((CONF / f"{kind.value}.yaml").read_text())
    assert values == {"model": {"activation": kind.value}}
    for override in (f"model/activation={kind.value}", f"model.activation={kind.value}"):
        for base in ("model=gpt", "model=llama"):
            assert zoo.compose([base, override]).model.activation == kind.value


def test_every_row_names_a_torch_function_and_cites_its_source():
    assert all(
        ACTIVATION_FACTS[k].paper and (ACTIVATION_FACTS[k].function, ACTIVATION_FACTS[k].approximate) in FORMULAS
        for k in KINDS
    )
