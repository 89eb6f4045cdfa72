"""What transformers' mixture-of-experts decoders share (Mixtral, OLMoE, Qwen3-MoE), for their
converters: the router and the stacked experts of a mixture layer, and the router's config.

transformers 5 holds a mixture layer as `mlp.gate.weight` (E, D), the router without bias, and
`mlp.experts.gate_up_proj` (E, 2·F, D), each expert's gate rows then its up rows, and
`mlp.experts.down_proj` (E, D, F): zoo's `ff.router.weight`, `ff.experts.w_in` and
`ff.experts.w_out` (`zoo.nn.moe`) as they are (the rows of `zoo.interop.hf.rope_decoder`'s
table that `moe_layer` selects). Every one of these routers takes the softmax of
the E logits in float32 and its top k: zoo's `model.moe_gate=softmax`, dropless
(`model.moe_capacity=null`), without shared experts; whether the k weights are renormalised
to sum 1 is Mixtral's always, OLMoE's and Qwen3-MoE's `norm_topk_prob` (`model.moe_renorm`).

What a mixture layer adds to training is not in the weights and is not converted: the
coefficient of the load-balancing loss (`router_aux_loss_coef`; zoo's `task.moe_balance`),
Mixtral's router jitter (`router_jitter_noise`, none in zoo). transformers' load-balancing loss
counts f_i over the N tokens (Σ f_i = k) where zoo's counts it over the N·k routed slots (Σ f_i =
1), and pools the layers before the product where zoo averages each layer's loss: for one layer
transformers' loss is k times zoo's (`tests/interop/test_hf_moe.py` checks it), so OLMoE's 0.01
at k = 8 is about `task.moe_balance=0.08`."""

from __future__ import annotations

from typing import Any

from zoo.config.facts.ffn import FFNKind, layer_kinds
from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ANY, require
from zoo.interop.hf.table import fields

# the options a family with transformers' router reproduces (`composed_as`): the experts' count,
# top-k and width as they are; softmax, dropless, no shared experts. `moe_renorm` and
# `moe_every` are each family's own.
ROUTER_OPTIONS = {
    "ffn": ("moe",),
    "moe_experts": ANY,
    "moe_top_k": ANY,
    "moe_d_ff": ANY,
    "moe_gate": ("softmax",),
    "moe_shared": (0,),
    "moe_capacity": (None,),
}


# the router's config fields of OLMoE and Qwen3-MoE (Mixtral names E num_local_experts and
# always renormalises)
ROUTER_FIELDS = fields("moe_experts num_experts", "moe_top_k num_experts_per_tok", "moe_renorm norm_topk_prob")


def moe_options(**family: Any) -> dict[str, Any]:
    """`ROUTER_OPTIONS` with a family's own (`moe_renorm=(True,)`, `moe_every=ANY`, ...)."""
    return {**ROUTER_OPTIONS, "moe_renorm": (True, False), "moe_every": (1,), **family}


def moe_layer(cfg: ModelConfig, i: int) -> bool:
    """Is layer i of `cfg` a mixture of experts (its rows: the router and the stacked experts)?"""
    return layer_kinds(cfg, cfg.n_layers)[i] == FFNKind.moe


def dense_layer(cfg: ModelConfig, i: int) -> bool:
    """Is layer i of `cfg` a dense feed-forward unit?"""
    return not moe_layer(cfg, i)


def router_keys(config: Any) -> dict[str, Any]:
    """zoo's model.moe_* keys of a transformers config's router (`ROUTER_FIELDS`)."""
    require(config, "hidden_act", "silu")
    keys = ROUTER_FIELDS.read(config)
    return {"ffn": "moe", **keys, "moe_renorm": bool(keys["moe_renorm"])}
