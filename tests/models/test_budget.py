"""model.param_budget sizes d_ff so arms of an ablation have the same non-embedding size. That
every kind of every model axis lands on a budget is checked on each row of the contract's design
(tests/contract/test_axes.py); here, the rules by hand and the refusals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zoo
from tests.conftest import ACTIVATIONS, FAMILIES, NORM_TYPES, NORMS, POSITIONS
from zoo.config.errors import ConfigError
from zoo.config.schema.model import GATED, Activation, ModelConfig
from zoo.config.schema.params import non_embedding_params

BUDGET = 200_000


def config(**kw) -> ModelConfig:
    base = dict(d_model=64, n_heads=4, n_layers=2, vocab_size=100, max_seq_len=32, param_budget=BUDGET)
    if kw.get("family") == "encoder_decoder":
        base["n_decoder_layers"] = 2
    return ModelConfig(**{**base, **kw})


def test_a_gated_unit_gets_about_two_thirds_of_the_width():
    plain = config(activation="gelu").d_ff
    gated = config(activation="swiglu").d_ff
    assert gated == pytest.approx(plain * 2 / 3, rel=0.02)
    assert Activation.swiglu in GATED


def test_the_sized_config_survives_a_checkpoint_round_trip():
    cfg = config(activation="swiglu")
    assert ModelConfig(**cfg.to_dict()).d_ff == cfg.d_ff


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"d_ff": 10}, ["conflicts", "param_budget"]),
        ({"param_budget": 500}, ["too small", "d_ff=1"]),
        ({"param_budget": -5}, ["param_budget", "positive"]),
    ],
)
def test_conflicts_and_impossible_budgets_are_refused(kw, words):
    with pytest.raises(ConfigError) as info:
        config(**kw)
    assert all(w in str(info.value) for w in words)


@pytest.mark.parametrize("d_model, mult, d_ff", [(48, 32, 1536), (96, 32, 3072), (64, 2.5, 160), (16, 0.01, 1)])
def test_ff_mult_sizes_d_ff_by_the_same_rule_at_every_width(d_model, mult, d_ff):
    cfg = config(param_budget=None, d_model=d_model, ff_mult=mult)
    assert cfg.d_ff == d_ff
    assert ModelConfig(**cfg.to_dict()).d_ff == d_ff  # read back from a run: its resolved d_ff agrees


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"ff_mult": 4, "d_ff": 10}, ["ff_mult=4", "d_ff=10", "set one"]),
        ({"ff_mult": 4}, ["ff_mult=4", "param_budget", "set one"]),
        ({"ff_mult": 0, "param_budget": None}, ["ff_mult", "> 0"]),
        ({"ff_mult": -2.0, "param_budget": None}, ["ff_mult", "> 0"]),
    ],
)
def test_ff_mult_with_another_sizing_or_not_positive_is_refused(kw, words):
    with pytest.raises(ConfigError) as info:
        config(**kw)
    assert all(w in str(info.value) for w in words)


# the config-only count against the built model


def built(cfg: ModelConfig) -> int:
    """What `zoo.summarize` reports for the built model. These models are tiny, so they are
    built on the CPU: the count does not depend on the device, and the meta device's
    initialisation runs through slower reference implementations."""
    with torch.device("cpu"):
        model = zoo.build_model(cfg)
    return zoo.summarize(model).non_embedding_params


def sized(**kw) -> ModelConfig:
    return config(**{"param_budget": None, "d_ff": 24, **kw})


# the count of every pair of kinds of two model axes, and of the head and attention options
# (no bias, one key and value head, a head size apart, untied, token types, embedding norm, head
# transform, output bias) with each kind, against the built model: the contract
# (tests/contract/test_axes.py); here, layer counts and random configs


@pytest.mark.parametrize(
    "position",
    [
        {"kind": "relative", "num_buckets": 8, "max_distance": 20},
        {"kind": "shaw", "clip": 3},
        {"kind": "learned", "offset": 2},
        {"kind": "rope"},
    ],
)
@pytest.mark.parametrize("n_decoder_layers", [1, 3])
def test_an_encoder_decoder_counts_its_decoder_layers(n_decoder_layers, position):
    cfg = sized(
        family="encoder_decoder", n_layers=2, n_decoder_layers=n_decoder_layers, position=position, n_kv_heads=2
    )
    assert non_embedding_params(cfg) == built(cfg)


@st.composite
def model_configs(draw) -> ModelConfig:
    head_dim = draw(st.sampled_from([2, 4, 6, 8]))
    n_kv_heads = draw(st.sampled_from([1, 2, 3]))
    family = draw(st.sampled_from(FAMILIES))
    position = {"kind": draw(st.sampled_from(POSITIONS))}
    if position["kind"] == "relative":
        position.update(num_buckets=draw(st.sampled_from([4, 8, 16])), max_distance=draw(st.integers(20, 40)))
    if position["kind"] == "shaw":
        position["clip"] = draw(st.integers(1, 6))
    if position["kind"] == "learned":
        position["offset"] = draw(st.sampled_from([0, 2]))
    return ModelConfig(
        family=family,
        position=position,
        norm=draw(st.sampled_from(NORMS)),
        norm_type=draw(st.sampled_from(NORM_TYPES)),
        activation=draw(st.sampled_from(ACTIVATIONS)),
        d_model=draw(st.sampled_from([8, 12, 16, 24])),
        n_heads=n_kv_heads * draw(st.sampled_from([1, 2])),
        n_kv_heads=n_kv_heads,
        head_dim=head_dim,
        n_layers=draw(st.integers(1, 3)),
        n_decoder_layers=draw(st.integers(1, 3)) if family == "encoder_decoder" else None,
        d_ff=draw(st.integers(1, 40)),
        vocab_size=draw(st.integers(8, 40)),
        max_seq_len=draw(st.integers(12, 24)),
        tie_embeddings=draw(st.booleans()),
        bias=draw(st.booleans()),
        embed_norm=draw(st.booleans()),
        token_types=draw(st.sampled_from([0, 2])),
        head_transform=draw(st.booleans()),
        output_bias=draw(st.booleans()),
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=model_configs())
@pytest.mark.slow
def test_random_configs_count_as_built(cfg):
    assert non_embedding_params(cfg) == built(cfg)


def test_a_budget_is_met_without_torch():
    """Sizing d_ff from a budget is config work: it loads no torch."""
    code = (
        "import sys, zoo.config.schema.model as m\n"
        "m.ModelConfig(d_model=64, n_heads=4, n_layers=2, vocab_size=100, max_seq_len=32, "
        "param_budget=50000)\n"
        "print('torch' in sys.modules)"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
