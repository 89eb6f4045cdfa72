"""DeepSeek-V3's mixture layer against transformers' (`DeepseekV3MoE`, random-initialised, float32):
zoo's `MoE` under model.moe_gate=sigmoid, model.moe_balance=bias (the selection bias is its
`e_score_correction_bias`), group-limited top-k (model.moe_groups = n_group, model.moe_top_groups
= topk_group), renormalised weights times model.moe_scale (routed_scaling_factor) and shared
experts gives its output within 1e-4 and picks its experts, with the weights copied; and the
dense first layers match first_k_dense_replace's. The whole DeepSeek-V3 model, with its
multi-head latent attention, is tests/interop/test_hf_deepseek_v3.py's."""

from __future__ import annotations

import pytest
import torch
from transformers import DeepseekV3Config
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3DecoderLayer, DeepseekV3MoE

import zoo
from tests.conftest import tiny
from zoo.config import ModelConfig
from zoo.config.facts.ffn import FFNKind, layer_kinds
from zoo.interop.hf.deepseek_moe import DEEPSEEK_FFN, deepseek_moe_hf_keys, deepseek_moe_keys
from zoo.interop.hf.table import Stack, Table
from zoo.nn.moe import MoE

D = 32


def _configs(norm: bool, groups: int, top_groups: int, shared: int) -> tuple[DeepseekV3Config, ModelConfig]:
    hf = DeepseekV3Config(
        hidden_size=D,
        intermediate_size=48,
        moe_intermediate_size=8,
        n_routed_experts=8,
        num_experts_per_tok=3,
        n_group=groups,
        topk_group=top_groups,
        n_shared_experts=shared,
        routed_scaling_factor=2.5,
        norm_topk_prob=norm,
        hidden_act="silu",
        num_hidden_layers=4,
        first_k_dense_replace=1,
    )
    ours = ModelConfig(
        **tiny(
            d_model=D,
            n_heads=4,
            n_layers=4,
            d_ff=48,
            bias=False,
            activation="swiglu",
            ffn="moe",
            moe_experts=8,
            moe_top_k=3,
            moe_d_ff=8,
            moe_shared=shared,
            moe_gate="sigmoid",
            moe_renorm=norm,
            moe_groups=groups,
            moe_top_groups=top_groups,
            moe_scale=2.5,
            moe_balance="bias",
            moe_first_dense=1,
        )
    )
    return hf, ours


def _copied(ref: DeepseekV3MoE, layer: MoE) -> None:
    """transformers' weights into zoo's layer: the router and its correction bias, the stacked
    experts as they are, the shared experts' gate and up rows stacked."""
    with torch.no_grad():
        layer.router.weight.copy_(ref.gate.weight)
        layer.router.score_bias.copy_(ref.gate.e_score_correction_bias)
        layer.experts.w_in.copy_(ref.experts.gate_up_proj)
        layer.experts.w_out.copy_(ref.experts.down_proj)
        if layer.shared is not None:
            shared = ref.shared_experts
            layer.shared.w_in.weight.copy_(torch.cat([shared.gate_proj.weight, shared.up_proj.weight]))
            layer.shared.w_out.weight.copy_(shared.down_proj.weight)


@pytest.mark.parametrize(
    "norm,groups,top_groups,shared", [(True, 4, 2, 1), (False, 2, 1, 2), (True, 1, 1, 1)], ids=["v3", "v2_like", "flat"]
)
def test_a_mixture_layer_gives_deepseek_v3s_output_and_choice(norm, groups, top_groups, shared):
    torch.manual_seed(0)
    hf, cfg = _configs(norm, groups, top_groups, shared)
    ref = DeepseekV3MoE(hf).float().eval()
    for p in ref.parameters():
        torch.nn.init.normal_(p, std=0.3)
    ref.gate.e_score_correction_bias.normal_(std=0.1)  # large enough to change choices
    layer = zoo.build_model(cfg).decoder.layers[-1].ff.eval()
    _copied(ref, layer)
    x = torch.randn(3, 11, D)  # (B, T, D)
    torch.testing.assert_close(layer(x), ref(x), atol=1e-4, rtol=0)
    _, ref_weights, ref_experts = ref.gate(x)
    _, _, weights, experts = layer.route(x.reshape(-1, D))
    order, ref_order = experts.argsort(dim=-1), ref_experts.argsort(dim=-1)
    assert torch.equal(experts.gather(1, order), ref_experts.gather(1, ref_order))
    torch.testing.assert_close(weights.gather(1, order), ref_weights.gather(1, ref_order), atol=1e-6, rtol=0)
    unbiased = ref.gate.weight.float() @ x.reshape(-1, D).T  # (E, N): the choice without the bias differs
    assert not torch.equal(unbiased.T.sigmoid().topk(3, dim=-1).indices.sort(-1).values, experts.sort(-1).values)


def test_the_table_ready_rows_map_every_feed_forward_weight_of_deepseek_v3_and_its_router_fields():
    """Each layer's feed-forward weights (dense first layer, then mixtures with their correction
    bias and shared experts) through `DEEPSEEK_FFN`'s rows: every tensor on both sides used, the
    outputs of transformers' units; the config fields read and written back."""
    torch.manual_seed(0)
    hf, cfg = _configs(True, 4, 2, 1)
    assert ModelConfig(**{**cfg.to_dict(), **deepseek_moe_keys(hf)}) == cfg
    assert all(getattr(hf, key) == value for key, value in deepseek_moe_hf_keys(cfg).items())
    model = zoo.build_model(cfg).eval()
    theirs, units = {}, []
    for i in range(4):
        mlp = DeepseekV3DecoderLayer(hf, i).mlp.float().eval()
        for p in [*mlp.parameters(), *mlp.buffers()]:
            torch.nn.init.normal_(p, std=0.3)
        theirs.update({f"model.layers.{i}.mlp.{k}": v for k, v in mlp.state_dict().items()})
        units.append(mlp)
    table = Table(
        embed="model.embed_tokens.weight", stacks=(Stack("decoder.layers.{i}.", "model.layers.{i}.", DEEPSEEK_FFN),)
    )
    ours = model.state_dict()
    used, filled = set(), set()
    with torch.no_grad():
        for name, names, _ in table.pairs(cfg):
            if name.startswith("decoder.layers."):
                ours[name].copy_(torch.cat([theirs[n] for n in names]))
                used.update(names)
                filled.add(name)
    assert used == set(theirs)
    assert filled == {k for k in ours if ".ff." in k}
    x = torch.randn(2, 5, D)  # (B, T, D)
    for i, mlp in enumerate(units):
        torch.testing.assert_close(model.decoder.layers[i].ff(x), mlp(x), atol=1e-4, rtol=0)


def test_the_dense_first_layers_are_deepseek_v3s():
    hf, cfg = _configs(True, 4, 2, 1)
    theirs = [isinstance(DeepseekV3DecoderLayer(hf, i).mlp, DeepseekV3MoE) for i in range(4)]
    assert theirs == [kind == FFNKind.moe for kind in layer_kinds(cfg, 4)] == [False, True, True, True]
