"""The position-scheme table (`zoo.config.facts.positions.POSITION_FACTS`) agrees with the schemes it
describes: every kind has a row; a row's parameters are the `PositionConfig` fields its module
takes and receives; where it acts is where its module changes something; its parity and bound
rules are enforced; the parameters it says it holds are its module's, counted as embeddings or
not as it says; its class names its own kind. A new scheme is checked here as soon as it has a row and a module."""

from __future__ import annotations

import inspect
from dataclasses import fields
from pathlib import Path

import pytest
import torch
import yaml

import zoo
from tests.conftest import tiny
from zoo.config import ConfigError, ModelConfig, PositionConfig, PositionKind
from zoo.config.facts.positions import POSITION_FACTS, Site, extrapolating, max_positions, readers
from zoo.nn import position as registry
from zoo.nn.position import POSITIONS, SCHEMES, build_position
from zoo.nn.position.base import PositionScheme

CONF = Path(__file__).resolve().parents[3] / "conf" / "model" / "position"
KINDS = list(PositionKind)
PARAMS = [f.name for f in fields(PositionConfig) if f.name != "kind"]
OWNED = [(kind, name) for kind in KINDS for name in POSITION_FACTS[kind].params + POSITION_FACTS[kind].layer_params]
EVEN_SIZES = sorted({f.even.size for f in POSITION_FACTS.values() if f.even is not None})


def config(kind: PositionKind, params: dict | None = None, **overrides) -> ModelConfig:
    cfg = tiny(position=kind.value, **overrides)
    cfg["position"].update(params or {})
    return ModelConfig(**cfg)


# valid values other than the default where doubling it is not one
OTHER = {
    "scaling": "yarn",
    "rotary_fraction": 0.5,
    "theta_local": 500.0,
    "nope_every": 2,
    "original_max_seq_len": 64,
    "attention_factor": 1.5,
}
# the RoPE scaling rule under which a field applies (zoo.config.facts.rope.SCALING_FACTS)
RULE = {name: {"scaling": "yarn"} for name in ("original_max_seq_len", "beta_fast", "beta_slow", "attention_factor")}


def changed(name: str):
    """A valid value of PositionConfig field `name` other than its default."""
    default = next(f.default for f in fields(PositionConfig) if f.name == name)
    return OTHER[name] if name in OTHER else default * 2 or 2


def test_every_kind_has_a_row_a_module_and_a_config_file():
    assert list(POSITION_FACTS) == KINDS
    assert set(POSITIONS) == set(KINDS)
    assert {p.stem for p in CONF.glob("*.yaml")} >= {k.value for k in KINDS}


def test_each_class_names_its_own_kind_once():
    assert [scheme.kind for scheme in SCHEMES] == list(POSITIONS)
    assert len(set(POSITIONS)) == len(SCHEMES)
    assert all(POSITIONS[kind].kind is kind for kind in KINDS)


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_a_schemes_row_is_what_its_module_holds_takes_and_does(subtests, kind, monkeypatch):
    """One scheme's row against its module: the parameters it holds (in each family's stacks) and
    whether they count as embeddings; the config fields its module takes and receives; where it
    acts; where a bounded scheme ends; the odd size it refuses; its config files."""
    for family in ("decoder_only", "encoder_decoder"):
        with subtests.test(f"its parameter count is what its module holds ({family})"):
            assert_parameter_count_is_what_its_module_holds(kind, family)
    with subtests.test("its parameters count as embeddings as it says"):
        assert_parameters_count_as_embeddings_as_it_says(kind)
    with subtests.test("its parameters are what its module takes"):
        taken = inspect.signature(POSITIONS[kind].__init__).parameters
        assert {n for n in taken if n in PARAMS} == set(POSITION_FACTS[kind].params)
    with subtests.test("its parameters reach its module"), monkeypatch.context() as patch:
        assert_parameters_reach_its_module(kind, patch)
    with subtests.test("it acts where its row says"):
        assert_acts_where_its_row_says(kind)
    with subtests.test("a bounded scheme ends at max_seq_len and the others do not"):
        assert_bounded_ends_at_max_seq_len(kind)
    for size in EVEN_SIZES:
        with subtests.test(f"an odd {size} is refused where it pairs it"):
            assert_odd_size_refused_by_the_scheme_that_pairs_it(kind, size)
    for path in sorted(CONF.glob("*.yaml")):
        values = yaml.safe_load(path.read_text())
        if values["kind"] != kind.value:
            continue
        with subtests.test(f"{path.name} sets only its scheme's parameters"):
            values.pop("kind")
            assert set(values) <= set(POSITION_FACTS[kind].params)
            PositionConfig(kind=kind, **values)


def test_every_config_file_names_a_kind():
    """Each file's kind is a scheme's (the per-kind test checks each file with its kind's row)."""
    for path in sorted(CONF.glob("*.yaml")):
        PositionKind(yaml.safe_load(path.read_text())["kind"])


def assert_parameter_count_is_what_its_module_holds(kind: PositionKind, family: str):
    stacks = [3, 2] if family == "encoder_decoder" else [3]
    sizes = {"n_layers": 3, "n_decoder_layers": 2} if family == "encoder_decoder" else {"n_layers": 3}
    cfg = ModelConfig(**tiny(family, kind.value, **sizes))
    model = zoo.build_model(cfg)
    held = {id(p): p.numel() for m in model.modules() if isinstance(m, PositionScheme) for p in m.parameters()}
    assert sum(held.values()) == sum(POSITION_FACTS[kind].parameters(cfg, n) for n in stacks)


def assert_parameters_count_as_embeddings_as_it_says(kind: PositionKind):
    facts = POSITION_FACTS[kind]
    cfg, base = config(kind), config(PositionKind.none)
    extra = zoo.summarize(zoo.build_model(cfg)).embedding_params - zoo.summarize(zoo.build_model(base)).embedding_params
    assert extra == (facts.parameters(cfg, cfg.n_layers) if facts.embedding else 0)
    assert (facts.embedding and facts.parameters(cfg, cfg.n_layers) > 0) == (kind == PositionKind.learned)


def assert_parameters_reach_its_module(kind: PositionKind, monkeypatch):
    received = {}

    class Recording(POSITIONS[kind]):
        def __init__(self, **kw):
            received.update(kw)
            super().__init__(**kw)

    monkeypatch.setitem(registry.POSITIONS, kind, Recording)
    values = {name: changed(name) for name in POSITION_FACTS[kind].params}
    build_position(config(kind, values), causal=True)
    assert {name: received.get(name) for name in values} == values


def assert_acts_where_its_row_says(kind: PositionKind):
    acts = POSITION_FACTS[kind].acts
    scheme = build_position(config(kind), causal=False)
    B, H, T, Dh = 1, 2, 5, 8
    positions = torch.arange(T)[None]
    x = torch.randn(B, T, 16)
    q, k = torch.randn(B, H, T, Dh), torch.randn(B, H, T, Dh)
    q2, k2, bias = scheme.attend(q, k, positions, positions)
    weights = torch.softmax(torch.randn(B, H, T, T), dim=-1)
    assert (not torch.equal(scheme.embed(x, positions), x)) == (Site.embeddings in acts)
    assert (bias is not None) == (Site.scores in acts)
    assert (not (torch.equal(q2, q) and torch.equal(k2, k))) == (Site.rotation in acts)
    assert (scheme.value_term(weights, positions, positions) is not None) == (Site.values in acts)
    assert type(scheme).needs_attention_weights == (Site.values in acts)
    assert type(scheme).keys_transformed_alone == (Site.rotation in acts)


def assert_bounded_ends_at_max_seq_len(kind: PositionKind):
    bounded = POSITION_FACTS[kind].bounded
    cfg = config(kind, max_seq_len=8)
    assert max_positions(cfg) == (8 if bounded else None)
    assert (kind in extrapolating()) == (not bounded and bool(POSITION_FACTS[kind].acts))
    scheme = build_position(cfg, causal=True)
    x, past = torch.zeros(1, 2, 16), torch.tensor([[7, 8]])
    if bounded:
        with pytest.raises(ValueError, match="model.max_seq_len=8"):
            scheme.embed(x, past)
    else:
        scheme.embed(x, past)
    scheme.embed(x, torch.tensor([[6, 7]]))


def assert_odd_size_refused_by_the_scheme_that_pairs_it(kind: PositionKind, size: str):
    even = POSITION_FACTS[kind].even
    sizes = {"d_model": 16, "n_heads": 2, "head_dim": 4}  # head_dim given: d_model need not divide
    config(kind, **sizes)
    odd = {**sizes, size: 15}
    if even is not None and even.size == size:
        with pytest.raises(ConfigError) as refused:
            config(kind, **odd)
        assert str(refused.value) == even.refusal.format(**odd)
        assert "even" in str(refused.value)
    else:
        config(kind, **odd)


def test_every_parameter_belongs_to_exactly_one_scheme():
    assert sorted(
        n for kind in KINDS for n in POSITION_FACTS[kind].params + POSITION_FACTS[kind].layer_params
    ) == sorted(PARAMS)
    assert all(len(readers(name)) == 1 for name in PARAMS)


@pytest.mark.parametrize("kind,name", OWNED, ids=lambda v: str(v))
def test_a_parameter_is_refused_for_a_scheme_that_does_not_read_it(kind, name):
    PositionConfig(kind=kind, **{name: changed(name)}, **RULE.get(name, {}))
    for other in KINDS:
        if other != kind:
            with pytest.raises(ConfigError) as refused:
                PositionConfig(kind=other, **{name: changed(name)})
            assert str(refused.value) == (
                f"model.position.{name} only applies to model/position={kind.value}, not {other.value}"
            )


def test_the_parity_refusals_keep_their_wording():
    with pytest.raises(
        ConfigError,
        match=r"^rope rotates pairs of dimensions: head size 3 \(d_model 12 / "
        r"n_heads 4\) must be even$",
    ):
        config(PositionKind.rope, d_model=12, n_heads=4)
    with pytest.raises(
        ConfigError,
        match=r"^sinusoidal positions pair sin/cos dimensions: d_model 15 must "
        r"be even$",
    ):
        config(PositionKind.sinusoidal, d_model=15, n_heads=1)


def test_every_row_cites_its_source():
    assert all(POSITION_FACTS[kind].paper for kind in KINDS)
