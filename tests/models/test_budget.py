"""model.param_budget sizes d_ff so arms of an ablation have the same non-embedding size."""

from __future__ import annotations

import pytest

import zoo
from tests.conftest import ACTIVATIONS, FAMILIES
from zoo.config.errors import ConfigError
from zoo.config.model import GATED, Activation, ModelConfig

BUDGET = 200_000


def config(**kw) -> ModelConfig:
    base = dict(d_model=64, n_heads=4, n_layers=2, vocab_size=100, max_seq_len=32, param_budget=BUDGET)
    if kw.get("family") == "encoder_decoder":
        base["n_decoder_layers"] = 2
    return ModelConfig(**{**base, **kw})


@pytest.mark.parametrize("n_kv_heads", [4, 1])
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_arm_lands_on_the_budget(family, activation, n_kv_heads):
    cfg = config(family=family, activation=activation, n_kv_heads=n_kv_heads)
    got = zoo.summarize(zoo.build_model(cfg)).non_embedding_params
    layers = cfg.n_layers + (cfg.n_decoder_layers or 0)
    per_unit_of_d_ff = layers * (3 if cfg.activation in GATED else 2) * cfg.d_model + 3 * layers  # with biases
    assert abs(got - BUDGET) <= per_unit_of_d_ff / 2 + 1


def test_a_gated_unit_gets_about_two_thirds_of_the_width():
    plain = config(activation="gelu").d_ff
    gated = config(activation="swiglu").d_ff
    assert gated == pytest.approx(plain * 2 / 3, rel=0.02)
    assert Activation.swiglu in GATED


def test_the_sized_config_survives_a_checkpoint_round_trip():
    cfg = config(activation="swiglu")
    assert ModelConfig(**cfg.to_dict()).d_ff == cfg.d_ff


@pytest.mark.parametrize("kw, words", [
    ({"d_ff": 10}, ["conflicts", "param_budget"]),
    ({"param_budget": 500}, ["too small", "d_ff=1"]),
    ({"param_budget": -5}, ["param_budget", "positive"]),
])
def test_conflicts_and_impossible_budgets_are_refused(kw, words):
    with pytest.raises(ConfigError) as info:
        config(**kw)
    assert all(w in str(info.value) for w in words)
