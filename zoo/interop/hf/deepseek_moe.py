"""DeepSeek-V3's feed-forward half (DeepSeek-AI 2024) <-> zoo's mixture with its routing: the
weight rows of each layer's feed-forward unit and the router's config fields. Its attention
(multi-head latent attention) is not here: the family (`zoo.interop.hf.deepseek_v3`) joins
these rows with that attention's.

transformers' `DeepseekV3MoE` holds `mlp.gate.weight` (E, D) and `mlp.gate.e_score_correction_bias`
(E,), the router and its selection bias: zoo's `ff.router.weight` and `ff.router.score_bias`
(model.moe_balance=bias); `mlp.experts.gate_up_proj` and `mlp.experts.down_proj` in the layout of
`zoo.interop.hf.experts`; `mlp.shared_experts.{gate,up,down}_proj`, the shared experts as one
unit n_shared_experts·moe_intermediate_size wide: zoo's `ff.shared.w_in` (gate rows, then up) and
`ff.shared.w_out`. Its first `first_k_dense_replace` layers are dense `mlp.{gate,up,down}_proj`
units intermediate_size wide (model.moe_first_dense, model.d_ff). The router: a sigmoid per
expert (model.moe_gate=sigmoid), group-limited top-k (n_group, topk_group: model.moe_groups,
model.moe_top_groups), the weights renormalised with norm_topk_prob (model.moe_renorm) and
multiplied by routed_scaling_factor (model.moe_scale). `tests/interop/test_hf_deepseek_v3_moe.py`
maps transformers' layers through these rows and matches their outputs."""

from __future__ import annotations

from typing import Any

from zoo.config.facts.ffn import expert_width
from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import require
from zoo.interop.hf.experts import dense_layer, moe_layer
from zoo.interop.hf.table import fields, row


def shared_layer(cfg: ModelConfig, i: int) -> bool:
    """Does layer i of `cfg` hold shared experts (a mixture with model.moe_shared > 0)?"""
    return moe_layer(cfg, i) and cfg.moe_shared > 0


# the rows of one layer's feed-forward unit, under the layer's prefix (model.layers.{i}.)
DEEPSEEK_FFN = (
    row("ff.w_in.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", when=dense_layer),
    row("ff.w_out.weight", "mlp.down_proj.weight", when=dense_layer),
    row("ff.router.weight", "mlp.gate.weight", when=moe_layer),  # (E, D)
    # (E,); a mixture balanced otherwise (model.moe_balance=aux_loss, none) selects as with a zero bias
    row("ff.router.score_bias", "mlp.gate.e_score_correction_bias", when=moe_layer, optional=True),
    row("ff.experts.w_in", "mlp.experts.gate_up_proj", when=moe_layer),  # (E, 2·F, D): gate rows, then up rows
    row("ff.experts.w_out", "mlp.experts.down_proj", when=moe_layer),  # (E, D, F)
    row(
        "ff.shared.w_in.weight",
        "mlp.shared_experts.gate_proj.weight",
        "mlp.shared_experts.up_proj.weight",
        when=shared_layer,
    ),  # (2·S·F, D)
    row("ff.shared.w_out.weight", "mlp.shared_experts.down_proj.weight", when=shared_layer),  # (D, S·F)
)

# the router's config fields, read as they are
DEEPSEEK_ROUTER_FIELDS = fields(
    "moe_experts n_routed_experts",
    "moe_top_k num_experts_per_tok",
    "moe_d_ff moe_intermediate_size",
    "moe_shared n_shared_experts",
    "moe_renorm norm_topk_prob",
    "moe_groups n_group",
    "moe_top_groups topk_group",
    "moe_scale routed_scaling_factor",
    "moe_first_dense first_k_dense_replace",
)


def deepseek_moe_keys(config: Any) -> dict[str, Any]:
    """zoo's model keys of a DeepSeek-V3 config's feed-forward half: its router fields, the
    sigmoid gate and the selection bias (model.moe_balance=bias), every layer past the dense
    ones a mixture, SwiGLU experts without biases."""
    require(config, "hidden_act", "silu")
    keys = DEEPSEEK_ROUTER_FIELDS.read(config)
    return {
        "ffn": "moe",
        "activation": "swiglu",
        "bias": False,
        **keys,
        "moe_renorm": bool(keys["moe_renorm"]),
        "moe_scale": float(keys["moe_scale"]),
        "moe_gate": "sigmoid",
        "moe_balance": "bias",
        "moe_every": 1,
        "d_ff": config.intermediate_size,
    }


def deepseek_moe_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    """A DeepSeek-V3 config's feed-forward arguments of a zoo config (the family refuses one
    that is not composed as DeepSeek-V3's: sigmoid, bias, every layer past the dense ones)."""
    return {
        **DEEPSEEK_ROUTER_FIELDS.write(cfg),
        "moe_intermediate_size": expert_width(cfg, cfg.d_ff),
        "intermediate_size": cfg.d_ff,
        "hidden_act": "silu",
    }
