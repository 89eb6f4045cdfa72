"""Qwen3-MoE (Qwen team 2025) <-> zoo's `qwen3` composition with `model.ffn=moe`: Qwen3's block
(decoder-only, RoPE, pre-norm RMSNorm, QK-norm per head, grouped-query attention, no biases)
whose feed-forward unit is a mixture of SwiGLU experts in every `decoder_sparse_step`-th layer.

The layers i with (i + 1) % decoder_sparse_step == 0 are mixtures, `moe_intermediate_size` wide
each, the others dense units `intermediate_size` wide: zoo's `model.moe_every`, `model.moe_d_ff`
and `model.d_ff`. The router takes the softmax of the E logits and the top k, renormalised with
`norm_topk_prob` (`model.moe_renorm`). The experts map as `zoo.interop.hf.experts` lays out.
Refused: `mlp_only_layers` (dense layers outside zoo's every-k-th pattern) and sliding-window
attention (`use_sliding_window`), as for Qwen3."""

from __future__ import annotations

from dataclasses import replace

from zoo.config.facts.ffn import expert_width
from zoo.interop.hf.common import ANY, composed_as, hf_rope, require
from zoo.interop.hf.experts import MixtureLayers, moe_options, router_keys
from zoo.interop.hf.qwen3 import Qwen3Converter


class Qwen3MoeConverter(MixtureLayers, Qwen3Converter):
    description = (
        "qwen3_moe: decoder-only, rope, pre-norm rmsnorm, swiglu, qk-norm per head, a mixture of experts "
        "in every k-th layer (softmax, top-k renormalised or not), no biases"
    )
    model_class = "Qwen3MoeForCausalLM"

    @staticmethod
    def matches(cfg) -> bool:
        options = moe_options(moe_every=ANY, qk_norm=("head",), qk_norm_type=(None, "rmsnorm"))
        return (
            composed_as(
                cfg,
                options,
                family="decoder_only",
                position="rope",
                norm="pre",
                norm_type="rmsnorm",
                activation="swiglu",
            )
            and not cfg.bias
        )

    def zoo_config(self, config):
        """Qwen3's composition with its experts in every decoder_sparse_step-th layer."""
        require(config, "use_sliding_window", (False, None))
        require(
            config, "mlp_only_layers", ([], None), "zoo's dense layers are those outside every decoder_sparse_step-th"
        )
        keys = router_keys(config, "num_experts", bool(config.norm_topk_prob))
        return replace(
            super().zoo_config(config),
            **keys,
            moe_d_ff=config.moe_intermediate_size,
            moe_every=config.decoder_sparse_step,
        )

    def hf_config(self, cfg):
        from transformers import Qwen3MoeConfig

        return Qwen3MoeConfig(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.d_model,
            intermediate_size=cfg.d_ff,
            moe_intermediate_size=expert_width(cfg, cfg.d_ff),
            num_hidden_layers=cfg.n_layers,
            num_attention_heads=cfg.n_heads,
            num_key_value_heads=cfg.n_kv_heads,
            head_dim=cfg.head_dim,
            hidden_act="silu",
            max_position_embeddings=cfg.max_seq_len,
            rms_norm_eps=cfg.norm_eps,
            tie_word_embeddings=cfg.tie_embeddings,
            rope_parameters=hf_rope(cfg.position),
            attention_bias=False,
            use_sliding_window=False,
            attention_dropout=0.0,
            num_experts=cfg.moe_experts,
            num_experts_per_tok=cfg.moe_top_k,
            norm_topk_prob=cfg.moe_renorm,
            decoder_sparse_step=cfg.moe_every,
            mlp_only_layers=[],
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
        )
