"""The key/value table (`zoo.config.facts.kv.KV_FACTS`, model.kv) agrees with the schema, the
configs and the built layers: every kind has a row and a YAML that composes; the latent widths
are refused under per-head keys, filled in from head_dim when left out, and each of the latent
row's refusals fires on one line before any weight exists; the row's parameter count is the
built layer's; the instability monitor reads a latent layer's maximum logit."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
import torch

import zoo
from tests.conftest import tiny
from zoo.cli.compose import compose
from zoo.config import ConfigError, ModelConfig
from zoo.config.facts.kv import KV_FACTS, LATENT_PARAMS, KVKind, latent_widths
from zoo.config.schema.params import self_attention_params
from zoo.nn.attention import Attention
from zoo.nn.latent_attention import LatentAttention
from zoo.training.monitor.instability import self_attentions

CONF = Path(__file__).resolve().parents[3] / "conf" / "model" / "kv"
KINDS = list(KVKind)
LATENT = dict(kv="latent", kv_lora_rank=12, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6)


def test_every_kind_has_a_row_and_a_config_file_that_composes():
    assert list(KV_FACTS) == KINDS
    assert {p.stem for p in CONF.glob("*.yaml")} == {k.value for k in KINDS}
    names = {f.name for f in fields(ModelConfig)}
    for kind in KINDS:
        model = compose(["model=llama", f"model/kv={kind.value}"]).model
        cfg = ModelConfig(**{**model, "position": dict(model.position)})
        assert cfg.kv == kind and KV_FACTS[kind].what and KV_FACTS[kind].paper
        assert set(KV_FACTS[kind].params) <= set(LATENT_PARAMS) <= names


def test_the_latent_widths_left_out_follow_head_dim_as_deepseek_v2_sizes_them():
    cfg = ModelConfig(**tiny("decoder_only", "rope", d_model=64, n_heads=4, kv="latent"))
    w = latent_widths(cfg)
    assert (w.q_rank, w.rank, w.nope, w.rope, w.v) == (None, 64, 16, 8, 16)  # Dh = 16
    assert KV_FACTS[KVKind.latent].cache(cfg) == 4.5 * cfg.head_dim  # DeepSeek-V2's (d_c + d_R) = 4.5 d_h


@pytest.mark.parametrize("name", LATENT_PARAMS)
def test_a_latent_width_is_refused_under_per_head_keys(name):
    with pytest.raises(ConfigError, match=rf"^model.{name}=8 only applies to model.kv=latent, not heads$"):
        ModelConfig(**tiny(**{name: 8}))


REFUSED = [
    ({"n_kv_heads": 1}, "model.n_kv_heads=1 must equal model.n_heads=2"),
    ({"qk_norm": "head"}, "takes no model.qk_norm=head"),
    ({"position": {"kind": "shaw"}}, "does not take model/position=shaw"),
    ({"parametrization": "mup"}, "does not take model.parametrization=mup"),
    ({"position": {"kind": "rope"}, "qk_rope_head_dim": 3}, "model.qk_rope_head_dim=3 must be even"),
    ({"kv_lora_rank": 0}, "model.kv_lora_rank must be a positive integer"),
]


@pytest.mark.parametrize("bad, words", REFUSED, ids=[w for _, w in REFUSED])
def test_each_refusal_of_the_latent_row_fires_on_one_line(bad, words):
    kw = {**tiny(**LATENT), **bad}
    with pytest.raises(ConfigError) as refused:
        ModelConfig(**kw)
    assert words in str(refused.value) and "\n" not in str(refused.value)
    assert len(KV_FACTS[KVKind.latent].refuses) == len(REFUSED) - 1  # less the widths' own check


@pytest.mark.parametrize("norm_type", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("q_lora_rank", [None, 10])
def test_the_rows_parameter_count_is_the_built_layers(q_lora_rank, bias, norm_type):
    cfg = ModelConfig(**tiny(q_lora_rank=q_lora_rank, bias=bias, norm_type=norm_type, **LATENT))
    layer = LatentAttention(cfg)
    assert self_attention_params(cfg) == sum(p.numel() for p in layer.parameters())
    heads = ModelConfig(**tiny())
    assert self_attention_params(heads) == sum(
        p.numel() for p in zoo.build_model(heads).decoder.layers[0].self_attn.parameters()
    )


def test_the_instability_monitor_reads_a_latent_layers_maximum_logit():
    model = zoo.build_model(tiny("decoder_only", "rope", **LATENT)).eval()
    layers = self_attentions(model)
    assert len(layers) == 2 and all(isinstance(m, LatentAttention) for m in layers)
    assert not any(isinstance(m, Attention) for m in layers)
    for m in layers:
        m.record_max_logit = True
    with torch.no_grad():
        model(torch.randint(0, 37, (2, 8)))
    assert all(m.last_max_logit is not None and torch.isfinite(m.last_max_logit) for m in layers)


@pytest.mark.parametrize("key,kind", [("attn_sink", "learned"), ("attn_sink", "off_by_one"), ("attn_gate", "headwise")])
def test_a_per_head_sink_or_gate_is_refused_with_latent_attention(key, kind):
    """LatentAttention has neither the sink column nor the output gate: refused, not ignored."""
    with pytest.raises(ConfigError, match=f"model.{key}={kind} is built into per-head attention"):
        ModelConfig(**tiny("decoder_only", "rope", **LATENT, **{key: kind}))


@pytest.mark.parametrize("key,value", [("value_residual", "fixed"), ("value_embeds", 1)])
def test_the_value_options_are_refused_with_latent_attention(key, value):
    """LatentAttention projects no per-head values before its cache: refused, not ignored."""
    with pytest.raises(ConfigError, match=f"model.{key}={value} mixes per-head values"):
        ModelConfig(**tiny("decoder_only", "rope", **LATENT, **{key: value}))


def test_latent_attention_takes_hyper_connections():
    """Hyper-connections act around the block, so latent attention builds and runs with them."""
    model = zoo.build_model(tiny("decoder_only", "rope", **LATENT, hyper_connections="static")).eval()
    assert model(torch.randint(0, 37, (2, 6))).logits.shape == (2, 6, 37)


@pytest.mark.parametrize(
    "position",
    [dict(scaling="yarn", scale=4.0), dict(scale=2.0), dict(rotary_fraction=0.5), dict(theta_local=1000.0)],
    ids=["yarn", "linear-2", "partial", "local-base"],
)
def test_a_rope_rule_the_latent_key_would_miss_is_refused(position):
    """Latent attention rotates its shared key with plain RoPE: a scaling rule, a partial
    rotation or a local base is refused with it, never applied in part."""
    (name, value), *_ = position.items()
    extra = dict(attention="sliding", window=4, global_every=2) if name == "theta_local" else {}
    with pytest.raises(ConfigError, match=f"model.position.{name}=.* is not applied by model.kv=latent"):
        ModelConfig(**tiny("decoder_only", "rope", **LATENT, **extra) | {"position": {"kind": "rope", **position}})
    ModelConfig(**tiny("decoder_only", "rope", **LATENT, **extra))  # the plain rule is served
