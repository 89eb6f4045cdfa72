"""The family table (`zoo.config.facts.families.FAMILY_FACTS`) agrees with the models it describes:
every family has a row, a module in `zoo.models.FAMILIES` and a conf/model preset; a built
model has the stacks its row names (an encoder, a causal decoder, cross-attention between them)
and the layer counts that go with them; it generates only where the row has a decoder. A new
family is checked here as soon as it has a row and a module."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

import zoo
from tests.conftest import tiny
from zoo.config import ConfigError, ModelConfig
from zoo.config.facts.families import FAMILY_FACTS, Family, family_facts
from zoo.models.build import FAMILIES

CONF = Path(__file__).resolve().parents[3] / "conf" / "model"
FAMILY_LIST = list(Family)


def test_every_family_has_a_row_a_module_and_a_preset():
    assert list(FAMILY_FACTS) == FAMILY_LIST == list(FAMILIES)
    presets = {yaml.safe_load(p.read_text()).get("family") for p in CONF.glob("*.yaml")}
    assert set(FAMILY_LIST) <= presets
    assert all(FAMILY_FACTS[f].paper for f in FAMILY_LIST)
    with pytest.raises(ConfigError, match="model.family='ed' is not allowed"):
        family_facts("ed")


@pytest.mark.parametrize("family", FAMILY_LIST, ids=str)
def test_a_family_builds_the_stacks_its_row_names_and_generates_only_with_a_decoder(subtests, family):
    with subtests.test("the stacks its row names"):
        assert_the_stacks_its_row_names(family)
    with subtests.test("only a family with a decoder generates"):
        assert_only_a_family_with_a_decoder_generates(family)


def assert_the_stacks_its_row_names(family):
    facts = FAMILY_FACTS[family]
    cfg = ModelConfig(**tiny(family.value))
    model = zoo.build_model(cfg)
    assert (getattr(model, "encoder", None) is not None) == facts.encoder
    assert (getattr(model, "decoder", None) is not None) == facts.decoder
    assert cfg.is_causal == facts.decoder
    crosses = any("cross" in name for name, _ in model.named_modules())
    assert crosses == facts.cross_attention
    if facts.cross_attention:
        assert len(model.decoder.layers) == cfg.n_decoder_layers
    else:
        with pytest.raises(ConfigError, match="n_decoder_layers"):
            ModelConfig(**tiny(family.value, n_decoder_layers=2))


def assert_only_a_family_with_a_decoder_generates(family):
    from zoo.models.generate import generate

    model = zoo.build_model(ModelConfig(**tiny(family.value)))
    prompt = torch.randint(4, 30, (1, 5))
    if FAMILY_FACTS[family].decoder:
        out = generate(model, prompt, max_new_tokens=3, bos_id=2, eos_id=None)
        assert out.shape == (1, 3)
    else:
        with pytest.raises(ValueError, match="cannot generate"):
            generate(model, prompt, max_new_tokens=3, bos_id=2, eos_id=None)
