"""The attention-variant table (`zoo.config.facts.attention.ATTENTION_FACTS`) agrees with the
schema, the configs and the stack: every kind has a row and a YAML that composes; a row's
parameters are `ModelConfig` fields, refused under a variant that does not read them; a banded
row's layers are the stack's sliding layers, whose masks and caches see the window."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

import zoo
from tests.conftest import tiny
from zoo.cli.compose import compose
from zoo.config import ConfigError, ModelConfig
from zoo.config.facts.attention import ATTENTION_FACTS, ATTENTION_PARAMS, AttentionKind, cache_slots, keys_attended
from zoo.config.facts.axes import axis

CONF = Path(__file__).resolve().parents[3] / "conf" / "model" / "attention"
KINDS = list(AttentionKind)


def test_every_kind_has_a_row_and_a_config_file():
    assert list(ATTENTION_FACTS) == KINDS
    assert {p.stem for p in CONF.glob("*.yaml")} >= {k.value for k in KINDS}


@pytest.mark.parametrize("name", sorted(p.stem for p in CONF.glob("*.yaml")))
def test_each_config_file_composes_into_its_kind(name):
    model = compose(["model=llama", f"model/attention={name}"]).model
    assert model.attention in {k.value for k in KINDS}
    cfg = ModelConfig(**{**model, "position": dict(model.position)})
    assert ATTENTION_FACTS[cfg.attention].banded == (cfg.window is not None)


def test_a_rows_parameters_are_model_fields_and_refused_elsewhere():
    names = {f.name for f in fields(ModelConfig)}
    for kind, facts in ATTENTION_FACTS.items():
        assert set(facts.params) <= set(ATTENTION_PARAMS) <= names
        assert facts.paper and facts.what
        extra = {"window": 5} if facts.banded else {}  # the variant's own required key
        for name in set(ATTENTION_PARAMS) - set(facts.params):
            with pytest.raises(ConfigError, match=f"model.{name}=3 only applies to"):
                ModelConfig(**tiny(attention=kind.value, **{name: 3, **extra}))


@pytest.mark.parametrize("kind", [k for k in KINDS if not ATTENTION_FACTS[k].recurrent], ids=str)
def test_a_banded_rows_layers_are_the_stacks_sliding_layers(kind):
    extra = {"window": 5, "global_every": 3} if ATTENTION_FACTS[kind].banded else {}
    model = zoo.build_model(tiny("encoder_decoder", attention=kind.value, n_layers=3, n_decoder_layers=4, **extra))
    for stack, n in ((model.encoder, 3), (model.decoder, 4)):
        expected = [5 if (i + 1) % 3 else None for i in range(n)] if extra else [None] * n
        assert stack.windows == expected
    assert keys_attended(None, 100) == 100 and keys_attended(5, 100) == 5 and keys_attended(5, 3) == 3
    assert cache_slots(None, 100) == 100 and cache_slots(5, 100) == 5


@pytest.mark.parametrize("kind", [k for k in KINDS if ATTENTION_FACTS[k].recurrent], ids=str)
def test_a_recurrent_rows_layers_are_recurrent_but_every_kth_and_hold_no_window(kind):
    """global_every=3 over six layers: the third and sixth are full attention, the others the
    recurrent kind's module; no layer is sliding, and an encoder's stack is refused on one line."""
    own = {  # the kind's widths for the tiny model (Mamba 2's), as the contract's axis sets them
        key.removeprefix("model."): value
        for key, value in axis("model.attention").settings(kind).items()
        if key not in ("model.attention", "model.global_every", "model.n_layers")
    }
    model = zoo.build_model(tiny(attention=kind.value, n_layers=6, global_every=3, **own))
    assert model.decoder.windows == [None] * 6
    assert model.decoder.mixers == [AttentionKind.full if (i + 1) % 3 == 0 else kind for i in range(6)]
    assert model.decoder.recurrent == [(i + 1) % 3 != 0 for i in range(6)]
    facts = ATTENTION_FACTS[kind]
    assert facts.parameters is not None and facts.flops is not None and facts.state is not None
    for family in ("encoder_only", "encoder_decoder"):
        with pytest.raises(ConfigError, match=f"model.attention={kind.value}.*model.family={family}") as refused:
            ModelConfig(**tiny(family, attention=kind.value, **own))
        assert "\n" not in str(refused.value)
