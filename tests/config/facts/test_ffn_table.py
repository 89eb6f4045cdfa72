"""The feed-forward table (`zoo.config.facts.ffn.FFN_FACTS`) agrees with the units it
describes: every kind has a row, a builder in `zoo.nn.feedforward.FFNS` and a config file; the
parameters a row says a unit holds are the built unit's (every activation, with and without
biases, or refused on one line), linear in d_ff as `model.param_budget` needs; its FLOPs per
token are what torch's FlopCounterMode counts on a forward (a mixture: its router, top-k and shared
experts; twice its active parameters), and what `zoo-train` composes from `model/ffn=KIND` is the
kind."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from torch.utils.flop_counter import FlopCounterMode

import zoo
from tests.conftest import ACTIVATIONS, tiny
from tests.conftest import FFNS as FFN_NAMES
from zoo.config import ConfigError, FFNKind, ModelConfig
from zoo.config.facts.ffn import FFN_FACTS, ffn_flops, ffn_parameters
from zoo.nn.feedforward import FFNS, build_ffn

CONF = Path(__file__).resolve().parents[3] / "conf" / "model" / "ffn"
KINDS = list(FFNKind)


def test_every_kind_has_a_row_a_builder_and_a_config_file():
    assert list(FFN_FACTS) == KINDS and FFN_NAMES == [k.value for k in KINDS]
    assert set(FFNS) == set(KINDS)
    assert {p.stem for p in CONF.glob("*.yaml")} == {k.value for k in KINDS}


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_a_rows_parameters_and_flops_are_its_units(kind, activation, bias):
    settings = dict(moe_experts=4, moe_top_k=2, moe_shared=1) if kind == FFNKind.moe else {}
    try:
        cfg = ModelConfig(**tiny(ffn=kind.value, activation=activation, bias=bias, d_ff=24, **settings))
    except ConfigError as refused:
        assert "\n" not in str(refused) and f"model.ffn={kind.value}" in str(refused)
        return
    unit = build_ffn(cfg)
    assert sum(p.numel() for p in unit.parameters()) == ffn_parameters(cfg, cfg.d_ff)
    T = 5
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        unit(torch.randn(1, T, cfg.d_model))
    assert counter.get_total_flops() == T * ffn_flops(cfg)
    assert ffn_flops(cfg) == FFN_FACTS[kind].flops(cfg, cfg.d_ff)
    if not bias:  # 2 FLOPs per weight a token passes through
        assert ffn_flops(cfg) == 2 * ffn_parameters(cfg, cfg.d_ff, active=True)


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_a_rows_parameters_are_linear_in_d_ff(kind):
    for activation in ("gelu", "swiglu"):
        for bias in (False, True):
            try:
                cfg = ModelConfig(**tiny(ffn=kind.value, activation=activation, bias=bias))
            except ConfigError:
                continue
            for count in (FFN_FACTS[kind].parameters, FFN_FACTS[kind].active):
                assert all(count(cfg, F) == count(cfg, 0) + F * (count(cfg, 1) - count(cfg, 0)) for F in (2, 7, 64))


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_the_config_file_and_the_override_compose_the_kind(kind):
    values = yaml.safe_load((CONF / f"{kind.value}.yaml").read_text())
    assert values == {"model": {"ffn": kind.value}}
    for override in (f"model/ffn={kind.value}", f"model.ffn={kind.value}"):
        assert zoo.compose(["model=llama", override]).model.ffn == kind.value


def test_an_old_config_without_the_key_is_dense():
    cfg = ModelConfig(**tiny())
    old = {k: v for k, v in cfg.to_dict().items() if k != "ffn"}
    assert ModelConfig(**old).ffn == FFNKind.dense
    assert zoo.build_model(ModelConfig(**old)).state_dict().keys() == zoo.build_model(cfg).state_dict().keys()


def test_every_row_says_what_it_is_and_cites_its_source():
    assert all(FFN_FACTS[k].what and FFN_FACTS[k].paper for k in KINDS)


def test_a_rows_keys_are_the_config_keys_named_after_its_kind():
    """The mixture's row names every model.moe_* and task.moe_* key, and no other row names one:
    a key added for a mixture is left out of a dense arm's name in zoo-compare only from here."""
    from dataclasses import fields

    from zoo.config.facts.ffn import unread_keys
    from zoo.config.schema.task import TaskConfig

    named = {
        f"{section}.{f.name}"
        for section, schema in (("model", ModelConfig), ("task", TaskConfig))
        for f in fields(schema)
        if f.name.startswith("moe_")
    }
    assert set(FFN_FACTS[FFNKind.moe].keys) == named and not FFN_FACTS[FFNKind.dense].keys
    assert unread_keys(FFNKind.dense) == named and not unread_keys(FFNKind.moe)
