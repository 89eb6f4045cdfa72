"""How a model's parameters start (`zoo.models.init`): a rule for every parameter of every
family, position scheme, norm and activation; weights that follow from the seed and the name
alone; a build on the meta device that, materialized, equals a whole build."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import zoo
from tests.conftest import FAMILIES, tiny
from zoo.models.init import ONES, ZEROS, Start, initial_value, materialize, parameters_on_meta


def _same(a: nn.Module, b: nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key


# a meta build materialized equals the whole build for every pair of kinds of two model axes:
# the contract (tests/contract/test_axes.py)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_parameter_starts_by_its_rule(family):
    """Matrices and tables at their std, biases zero, norm gains one."""
    model = zoo.build_model(tiny(family, "learned", d_model=64, n_heads=4, bias=True, init_std=0.05))
    rules = model.init_rules()
    assert set(rules) == {name for name, _ in model.named_parameters()}
    for name, param in model.named_parameters():
        rule = rules[name]
        if rule == ZEROS:
            assert not param.any(), name
        elif rule == ONES:
            assert torch.equal(param, torch.ones_like(param)), name
        else:
            assert rule.start == Start.normal
            if param.numel() >= 1024:
                assert abs(param.std().item() / rule.std - 1) < 0.1, name
    assert rules[
        "decoder.layers.0.ff.w_in.weight" if family != "encoder_only" else "encoder.layers.0.ff.w_in.weight"
    ].std == pytest.approx(0.05)


def test_the_weights_follow_from_the_seed_and_the_name_alone():
    """The same seed gives the same weights; a layer's weights do not depend on how many layers
    follow it; another seed gives other weights."""
    two = zoo.build_model(tiny(n_layers=2), init_seed=3)
    three = zoo.build_model(tiny(n_layers=3), init_seed=3)
    other = zoo.build_model(tiny(n_layers=2), init_seed=4)
    _same(two, zoo.build_model(tiny(n_layers=2), init_seed=3))
    for name, param in two.named_parameters():
        assert torch.equal(param, dict(three.named_parameters())[name]), name
    assert not torch.equal(two.decoder.layers[0].ff.w_in.weight, other.decoder.layers[0].ff.w_in.weight)


def test_building_draws_one_seed_from_the_global_generator_whole_or_on_meta():
    """What a run draws after building (dropout, data order) is the same whether the model
    was built whole or on the meta device, and the seed comes from torch.manual_seed."""
    torch.manual_seed(11)
    whole = zoo.build_model(tiny())
    after_whole = torch.rand(4)
    torch.manual_seed(11)
    with parameters_on_meta():
        empty = zoo.build_model(tiny())
    after_meta = torch.rand(4)
    torch.manual_seed(11)
    torch.randint(0, 2**62, ())
    assert torch.equal(after_whole, after_meta) and torch.equal(after_whole, torch.rand(4))
    assert whole.init_seed == empty.init_seed


def test_a_classifier_head_starts_by_its_rule_whole_or_on_meta():
    from zoo.tasks.classification import Classification as ClassificationTask

    def build():
        return ClassificationTask(
            model=tiny("encoder_only"), task={"kind": "classification"}, extra={"labels": ["a", "b", "c"]}
        )

    torch.manual_seed(5)
    whole = build()
    torch.manual_seed(5)
    with parameters_on_meta():
        empty = build()
    assert empty.head.weight.is_meta
    materialize(empty.model, torch.device("cpu"), empty.model.init_rules(), empty.model.init_seed)
    materialize(empty.head, torch.device("cpu"), empty.head_rules(), empty.model.init_seed, prefix="head.")
    _same(whole, empty)
    assert not whole.head.bias.any()


def test_a_parameter_without_a_rule_is_named():
    model = zoo.build_model(tiny())
    model.decoder.layers[0].gate = nn.Parameter(torch.zeros(3))
    with pytest.raises(KeyError, match="decoder.layers.0.gate"):
        model.init_rules()


def test_a_normal_start_needs_a_positive_std():
    from zoo.models.init import Init

    with pytest.raises(ValueError, match="std > 0"):
        Init(Start.normal, 0.0)
    assert initial_value(ZEROS, torch.Size([2, 3]), 0, "x").abs().sum() == 0


def test_a_module_starts_its_own_parameters_as_its_row_declares():
    """A module of zoo's own carries its row's `starts` (`zoo.config.facts.starts`): a constant, a
    normal at model.init_std, and its children keep theirs; a start the row does not declare is
    named."""
    from zoo.config.facts.starts import NORMAL, constant

    model = zoo.build_model(tiny(init_std=0.05))
    layer = model.decoder.layers[0]
    layer.alpha = nn.Parameter(torch.empty(3))
    layer.table = nn.Parameter(torch.empty(8, 8))
    layer.starts = {"alpha": constant(0.5), "table": NORMAL, "no_such_parameter": constant(2.0)}
    rules = model.init_rules()
    assert rules["decoder.layers.0.alpha"] == constant(0.5)
    assert rules["decoder.layers.0.table"].std == pytest.approx(0.05)
    assert "decoder.layers.0.no_such_parameter" not in rules
    assert torch.equal(initial_value(rules["decoder.layers.0.alpha"], torch.Size([3]), 0, "a"), torch.full((3,), 0.5))
    norm = next(m for m in model.modules() if hasattr(m, "starts") and "weight" in m.starts)
    assert norm.starts["weight"] == ONES
    del layer.starts
    with pytest.raises(KeyError, match="decoder.layers.0.alpha"):
        model.init_rules()


def test_a_start_refuses_what_it_does_not_take():
    from zoo.config.facts.starts import Init, constant

    with pytest.raises(ValueError, match="finite"):
        constant(float("nan"))
    with pytest.raises(ValueError, match="no std"):
        Init(Start.zeros, 0.1)
    with pytest.raises(ValueError, match="without a std"):
        initial_value(Init(Start.normal), torch.Size([2]), 0, "x")
