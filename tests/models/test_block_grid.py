"""The whole product of family × position × norm placement × block, checked config-only, is refused
on one line before any weight exists exactly where a block's row says; QK-norm parameters count as
built. That the caps decode from the cache what the whole sequence gives is
tests/models/test_decoding_rows.py's (each pair of kinds in a covering design, tests/covering.py);
that every pair of kinds of two model axes builds and counts as built is the contract's
(tests/contract/test_axes.py). The default keeps today's block."""

from __future__ import annotations

import itertools

import pytest

import zoo
from tests.conftest import tiny
from tests.covering import cases, model_axes
from zoo.config import ConfigError, ModelConfig
from zoo.config.facts.blocks import QKNorm
from zoo.config.schema.model import model_defaults
from zoo.config.schema.params import non_embedding_params
from zoo.nn.attention import Attention


def built_count(cfg: dict) -> tuple[ModelConfig, int]:
    model = zoo.build_model(cfg)
    return model.config, zoo.summarize(model).non_embedding_params


GRID = model_axes("family", "position", "norm", "block")


# every pair of kinds of two model axes builds and counts as built: the contract
# (tests/contract/test_axes.py); here, the whole product config-only


def test_the_cells_refused_are_those_a_block_row_refuses_each_on_one_line():
    """The whole product, config only: a cell is refused exactly where its block's row says
    (parallel_two_norms with the post placement), on one line, before any weight exists."""
    refused = []
    for family, position, norm, block in itertools.product(*GRID.values()):
        try:
            ModelConfig(**tiny(family, position, norm=norm, block=block, d_ff=24))
        except ConfigError as error:
            assert "\n" not in str(error), error
            refused.append((family, position, norm, block))
    assert refused == [(f, p, "post", "parallel_two_norms") for f in GRID["family"] for p in GRID["position"]]


@pytest.mark.parametrize(
    "family, qk_norm, qk_norm_type, bias",
    cases(
        {
            **model_axes("family"),
            "qk_norm": ["head", "projection"],
            "qk_norm_type": [None, "layernorm", "rmsnorm"],
            "bias": [True, False],
        }
    ),
)
def test_qk_norm_parameters_count_as_built(family, qk_norm, qk_norm_type, bias):
    cfg, count = built_count(
        tiny(family, "rope", qk_norm=qk_norm, qk_norm_type=qk_norm_type, bias=bias, n_kv_heads=1, norm="sandwich")
    )
    assert non_embedding_params(cfg) == count
    without = non_embedding_params(ModelConfig(**{**cfg.to_dict(), "qk_norm": "none", "qk_norm_type": None}))
    attentions = cfg.n_layers + 2 * (cfg.n_decoder_layers or 0)
    width = cfg.head_dim if qk_norm == "head" else None
    q, k = (width, width) if width else (cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim)
    per_width = 2 if (qk_norm_type or "layernorm") == "layernorm" and bias else 1  # tiny's norm_type: layernorm
    assert count - without == attentions * (q + k) * per_width


def test_the_defaults_keep_todays_block():
    """At their defaults the new keys build the block of the versions before them: the same
    state-dict names in the same order (optimizer states are matched by it), no norm or cap
    more; a config written before the keys existed reads the same."""
    model = zoo.build_model(tiny("encoder_decoder", "rope", n_layers=1, n_decoder_layers=1))
    block_keys = [k for k in model.state_dict() if k.startswith("decoder.layers.0.")]
    assert [k.removeprefix("decoder.layers.0.") for k in block_keys] == [
        "self_attn.qkv_proj.weight",
        "self_attn.qkv_proj.bias",
        "self_attn.o_proj.weight",
        "self_attn.o_proj.bias",
        "self_attn_sub.norm.weight",
        "self_attn_sub.norm.bias",
        "cross_attn.q_proj.weight",
        "cross_attn.q_proj.bias",
        "cross_attn.kv_proj.weight",
        "cross_attn.kv_proj.bias",
        "cross_attn.o_proj.weight",
        "cross_attn.o_proj.bias",
        "cross_attn_sub.norm.weight",
        "cross_attn_sub.norm.bias",
        "ff.w_in.weight",
        "ff.w_in.bias",
        "ff.w_out.weight",
        "ff.w_out.bias",
        "ff_sub.norm.weight",
        "ff_sub.norm.bias",
    ]
    cfg = model.config
    defaults = model_defaults()
    assert (defaults["block"], defaults["qk_norm"], defaults["qk_norm_type"]) == ("sequential", "none", None)
    assert (defaults["attn_softcap"], defaults["final_softcap"]) == (None, None)
    old = {
        k: v
        for k, v in cfg.to_dict().items()
        if k not in ("block", "qk_norm", "qk_norm_type", "attn_softcap", "final_softcap")
    }
    assert ModelConfig(**old) == cfg
    assert all(a.softcap is None and a.qk_norm == QKNorm.none for a in model.modules() if isinstance(a, Attention))
