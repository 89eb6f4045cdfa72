"""The rows of `zoo.config.facts.residuals` in step with what is built: every kind has a row and a
YAML, the parameters a row declares start as its `starts` say, the value-embedding layout is the
record's, what a row refuses is refused on one line before any weight exists, and the defaults
build today's model (no module, no state-dict name more, the same logits bit for bit)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

import zoo
from tests.conftest import FAMILIES, tiny
from zoo.config import ConfigError, ModelConfig
from zoo.config.facts.residuals import (
    HYPER_FACTS,
    VALUE_EMBED_FACTS,
    VALUE_RESIDUAL_FACTS,
    HyperConnections,
    ValueResidual,
    non_default_residual_options,
    value_embed_layers,
)
from zoo.config.schema.model import model_defaults
from zoo.nn.hyper import HyperConnection
from zoo.nn.values import ValueStream

CONF = Path(__file__).resolve().parents[3] / "conf" / "model"


def test_every_kind_has_one_row_in_enum_order():
    assert list(VALUE_RESIDUAL_FACTS) == list(ValueResidual)
    assert list(HYPER_FACTS) == list(HyperConnections)
    for row in [*VALUE_RESIDUAL_FACTS.values(), *HYPER_FACTS.values(), VALUE_EMBED_FACTS]:
        assert row.what and row.paper


@pytest.mark.parametrize("group, kinds", [("value_residual", ValueResidual), ("hyper_connections", HyperConnections)])
def test_every_kind_has_a_yaml_that_sets_its_key(group, kinds):
    files = {p.stem: yaml.safe_load(p.read_text()) for p in (CONF / group).glob("*.yaml")}
    assert set(files) == {k.value for k in kinds}
    for kind, content in files.items():
        assert content == {"model": {group: kind}}
        assert getattr(zoo.compose([f"model/{group}={kind}"]).model, group) == kind


def test_the_value_embedding_layout_is_the_records_012_then_012():
    """modded-nanogpt (2025-01-16): three tables over twelve layers, [0, 1, 2, None x 6, 0, 1, 2]."""
    assert value_embed_layers(12, 3) == [0, 1, 2] + [None] * 6 + [0, 1, 2]
    assert value_embed_layers(2, 1) == [0, 0]
    assert value_embed_layers(4, 0) == [None] * 4


def test_the_built_parameters_start_as_the_rows_say():
    cfg = ModelConfig(**tiny(n_layers=4, value_residual="learned", value_embeds=2, hyper_connections="dynamic"))
    model = zoo.build_model(cfg)
    stream = model.decoder.values
    assert isinstance(stream, ValueStream)
    assert torch.equal(stream.residual_lambdas, torch.full((3,), 0.5))  # layers 1..3
    assert torch.equal(stream.embed_lambdas, torch.full((4, 2), 0.5))  # layers 0, 1, 2, 3 hold a table
    assert [t.weight.std().item() > 0 for t in stream.tables] == [True, True]
    sites = [m for m in model.modules() if isinstance(m, HyperConnection)]
    assert len(sites) == 4 * 2  # a sequential block: two residual sites
    n = cfg.residual_streams
    for j, site in enumerate(sites):
        start = torch.cat([torch.zeros(n, 1), torch.eye(n)], dim=1)
        start[j % n, 0] = 1.0
        alpha, beta = site.weights(torch.randn(1, 3, n, cfg.d_model))
        assert torch.equal(site.alpha_start, start) and torch.equal(site.alpha, torch.zeros(n, n + 1))
        assert torch.equal(alpha, start.expand_as(alpha)) and torch.equal(beta, torch.ones_like(beta))  # W = 0
        assert (site.alpha_scale.item(), site.beta_scale.item()) == (pytest.approx(0.01), pytest.approx(0.01))
        assert not site.alpha_fn.any() and not site.beta_fn.any()


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({"value_residual": "fixed", "n_layers": 1, "n_decoder_layers": 1}, ["model.value_residual=fixed", "2 layers"]),
        ({"value_embeds": 2, "n_layers": 3, "n_decoder_layers": 3}, ["model.value_embeds=2", "at most 1"]),
        ({"value_embeds": -1}, ["model.value_embeds", ">= 0"]),
        ({"value_embeds": True}, ["model.value_embeds"]),
        ({"residual_streams": 4}, ["model.residual_streams=4", "model.hyper_connections=static or dynamic"]),
        ({"hyper_connections": "static", "residual_streams": 1}, ["model.residual_streams=1", "plain residual"]),
        ({"hyper_connections": "dynamic", "norm": "post"}, ["model.hyper_connections=dynamic", "model.norm=post"]),
        ({"hyper_connections": "many"}, ["model.hyper_connections", "none, static, dynamic"]),
        ({"value_residual": "mixed"}, ["model.value_residual", "none, fixed, learned"]),
    ],
)
def test_what_the_rows_refuse_is_refused_on_one_line_naming_the_key(subtests, overrides, words):
    for family in FAMILIES:  # config-only: every family in one test
        with subtests.test(family=family):
            kwargs = tiny(family, **overrides)
            if family != "encoder_decoder":
                kwargs.pop("n_decoder_layers", None)
            with pytest.raises(ConfigError) as info:
                ModelConfig(**kwargs)
            assert "\n" not in str(info.value) and all(w in str(info.value) for w in words), str(info.value)


def test_an_encoder_decoders_shorter_decoder_bounds_the_value_embeddings():
    with pytest.raises(ConfigError, match="model.n_decoder_layers=2"):
        ModelConfig(**tiny("encoder_decoder", n_layers=6, n_decoder_layers=2, value_embeds=2))


def test_hyper_connections_default_to_four_streams_and_say_so():
    cfg = ModelConfig(**tiny(hyper_connections="static"))
    assert cfg.residual_streams == 4
    assert non_default_residual_options(cfg) == ["model.hyper_connections=static", "model.residual_streams=4"]
    assert non_default_residual_options(ModelConfig(**tiny())) == []


@pytest.mark.parametrize("family", FAMILIES)
def test_the_defaults_build_todays_model_bit_for_bit(family):
    """At their defaults the keys build no module and no state-dict name, and a config written
    before they existed reads the same and computes the same logits."""
    defaults = model_defaults()
    assert (defaults["value_residual"], defaults["value_embeds"], defaults["hyper_connections"]) == ("none", 0, "none")
    assert defaults["residual_streams"] is None
    cfg = ModelConfig(**tiny(family, "rope"))
    assert cfg.residual_streams == 1
    keys = ("value_residual", "value_embeds", "hyper_connections", "residual_streams")
    old = {k: v for k, v in cfg.to_dict().items() if k not in keys}
    assert ModelConfig(**old) == cfg
    model = zoo.build_model(cfg, init_seed=3).eval()
    assert not any(isinstance(m, (ValueStream, HyperConnection)) for m in model.modules())
    names = [name for name, _ in model.named_parameters()]
    assert not any(word in name for name in names for word in ("values", "hyper", "lambda"))
    # the same weights through the option at a setting that is the identity: bit for bit
    ids = torch.randint(0, cfg.vocab_size, (2, 9))
    inputs = {"input_ids": ids} if family != "encoder_decoder" else {"input_ids": ids, "decoder_input_ids": ids}
    learned = zoo.build_model(ModelConfig(**{**old, "value_residual": "learned"}), init_seed=3).eval()
    learned.load_state_dict(model.state_dict(), strict=False)
    for stream in [m for m in learned.modules() if isinstance(m, ValueStream)]:
        stream.residual_lambdas.data.zero_()  # v_l <- 1·v_l + 0·v_1
    with torch.no_grad():
        assert torch.equal(learned(**inputs).logits, model(**inputs).logits)
