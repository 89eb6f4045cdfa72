"""The contract every ablation axis keeps, parametrized over `zoo.config.facts.axes.AXES` × its
kinds: each kind has its row, and every pair of kinds of two model axes is built together in a
row of one covering design over all of them (or is refused on one line before any weight
exists), whose torch-free parameter count is the built model's and whose FLOPs per token from
the rows are what a forward measures; the planner plans each kind. The slow tier trains a kind and
resumes it bit for bit (tests/contract/test_axes_resume.py)."""

from __future__ import annotations

import itertools

import pytest
import torch

import zoo
from tests.contract.conftest import (
    AXES,
    COLUMNS,
    MODEL_PAIRS,
    PAIRS,
    REFUSED,
    ROWS,
    flop_counter,
    forward_inputs,
    model_kwargs,
    pair_id,
    row_config,
    row_id,
    row_settings,
)
from tests.covering import covered_pairs
from zoo.config import ConfigError, ModelConfig
from zoo.config.facts.axes import axis
from zoo.config.schema.params import non_embedding_params
from zoo.models.init import has_meta_parameters, materialize, parameters_on_meta
from zoo.plan.options import PlanOptions
from zoo.plan.planner import plan
from zoo.plan.trace import WEIGHTS


def test_every_axis_is_a_distinct_config_key_with_kinds():
    keys = [a.key for a in AXES]
    assert len(keys) == len(set(keys))
    assert all(list(a.kinds) for a in AXES)
    assert axis("model.norm_type").key == "model.norm_type"
    with pytest.raises(KeyError, match="model.norm_type"):
        axis("model.no_such_axis")


@pytest.mark.parametrize("ax", AXES, ids=pair_id)
def test_an_axis_table_has_one_row_per_kind_in_enum_order(ax):
    if ax.facts is not None:
        assert list(ax.facts) == list(ax.kinds)


@pytest.mark.parametrize("ax,kind", PAIRS, ids=pair_id)
def test_a_kinds_settings_select_it_and_an_unknown_kind_is_refused(ax, kind):
    settings = ax.settings(kind)
    assert settings[ax.key] == kind.value
    with pytest.raises(ConfigError, match=ax.key):
        ax.settings("no_such_kind")


@pytest.mark.parametrize("ax", [a for a in AXES if a.model_level], ids=pair_id)
def test_an_unknown_kind_is_refused_on_one_line_naming_the_choices(ax):
    with pytest.raises(ConfigError) as refused:
        ModelConfig(**model_kwargs({ax.key: "no_such_kind"}))
    message = str(refused.value)
    assert "\n" not in message and f"{ax.key}='no_such_kind'" in message
    assert all(kind.value in message for kind in ax.kinds)


def _config_or_refusal(ax, kind, family):
    """(ModelConfig, None) or (None, the one-line refusal)."""
    try:
        return ModelConfig(**model_kwargs(ax.settings(kind), family)), None
    except ConfigError as refused:
        return None, str(refused)


def test_every_pair_of_kinds_of_two_model_axes_is_a_row_or_refused():
    """The design holds every pair of values of two columns (a kind of a model axis, a value of
    a model option); a pair it leaves out is one where a kind asks for another value of a column
    (a mixture's balancing needs ffn=moe) or that the config refuses alone, on one line naming
    a key."""
    held = covered_pairs(ROWS)
    left = [dict(p) for p in REFUSED]
    for a, b in itertools.combinations(COLUMNS, 2):
        for va in COLUMNS[a]:
            for vb in COLUMNS[b]:
                assert (a, va, b, vb) in held or {a: va, b: vb} in left, (a, va, b, vb)
    for pair in left:
        config, why = row_config(pair)
        assert config is None, pair
        if row_settings(pair) is not None:
            assert "\n" not in why and any(key in why for key in pair), why


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_a_row_of_every_model_axis_and_option_builds_and_counts_its_parameters_and_flops(row):
    """Built, the row's model runs a forward over T tokens (an encoder-decoder: T source and T
    target tokens); its non-embedding parameters are the torch-free count's, and torch's
    FlopCounterMode counts the matrix multiplies (linear layers, attention's q·kᵀ and
    weights·v, a position scheme's own, a recurrent layer's) that `flops_per_token` at context
    T says, times T. Built on the meta device and materialized by its rules, it is the whole
    build, weight for weight. Sized by model.param_budget, it lands on the budget."""
    cfg, why = row_config(row)
    assert cfg is not None, why
    model, T = zoo.build_model(cfg, init_seed=7).eval(), cfg.max_seq_len
    with parameters_on_meta():
        empty = zoo.build_model(cfg, init_seed=7)
    assert all(p.is_meta for p in empty.parameters())
    assert not any(b.is_meta for b in empty.buffers())  # RoPE's frequencies, ALiBi's slopes: built
    materialize(empty, torch.device("cpu"), empty.init_rules(), empty.init_seed)
    assert not has_meta_parameters(empty)
    whole, made = model.state_dict(), empty.state_dict()
    assert whole.keys() == made.keys()
    for key in whole:
        assert torch.equal(whole[key], made[key]), key
    with flop_counter() as counter, torch.no_grad():
        out = model(**forward_inputs(cfg.family, T, cfg.vocab_size))
    assert torch.isfinite(out.logits).all()
    summary = zoo.summarize(model, seq_len=T)
    assert non_embedding_params(cfg) == summary.non_embedding_params
    assert counter.get_total_flops() == T * summary.flops_per_token
    assert_lands_on_a_budget(row, budget=int(summary.non_embedding_params * 1.5))


def assert_lands_on_a_budget(row, budget: int) -> None:
    """model.param_budget sizes d_ff so that the row's built model has `budget` non-embedding
    parameters, within half of what one unit of d_ff adds (the experts follow d_ff here:
    model.moe_d_ff=null, since experts of a fixed width leave nothing to size when every layer
    is a mixture, which tests/nn/test_moe.py holds to its refusal)."""
    kwargs = {**model_kwargs(row_settings(row)), "moe_d_ff": None}
    sized = ModelConfig(**kwargs, param_budget=budget)
    built = zoo.summarize(zoo.build_model(sized)).non_embedding_params
    wider = ModelConfig(**{**kwargs, "d_ff": sized.d_ff + 1})
    per_unit_of_d_ff = non_embedding_params(wider) - non_embedding_params(sized)
    assert per_unit_of_d_ff > 0
    assert abs(built - budget) <= per_unit_of_d_ff / 2 + 1, (built, budget, per_unit_of_d_ff)


@pytest.mark.parametrize("ax,kind", MODEL_PAIRS, ids=pair_id)
def test_the_planner_plans_a_kind_with_the_built_models_parameters(ax, kind):
    """zoo-plan's step on fake tensors holds the parameters of the model the kind builds, in
    float32 weights, gradients and AdamW's two moments."""
    cfg, refusal = _config_or_refusal(ax, kind, "decoder_only")
    if refusal is not None:
        pytest.skip(refusal)
    options = PlanOptions(batch=1, seq_len=16, device="cpu", precision="32-true", memory="1GiB")
    planned = plan(cfg, options)
    params = zoo.summarize(zoo.build_model(cfg)).total_params
    assert planned.step.param_count == params
    assert planned.parts[WEIGHTS] == 4 * params and planned.total > 4 * 4 * params
