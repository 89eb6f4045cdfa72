"""Qwen3-Next parity with transformers' `Qwen3NextForCausalLM`, whole models built from small
random configs (D 32, 4 heads over 2 key/value heads, Dh 8, 4 experts, top-2; no downloads): every
weight away from its default, so a misplaced norm, gate or rotary dimension shows. Its layers all
full attention (full_attention_interval=1): converted to zoo, the same logits on a padded batch
(float32, <= 1e-4) with partial RoPE, zero-centred norms, the gated attention and the mixture with
its gated shared expert, mixtures in every layer past the dense first or in every other one, or
none; exported back, the same weights and logits; a zoo model exported computes the same logits
in transformers; a saved directory loads for init_from; the greedy tokens with zoo's cache are
transformers' own. The hybrid (Gated DeltaNet layers, every k-th full: 1:1 and Qwen3-Next's 3:1)
runs the same checks where zoo builds that mixer; what zoo cannot reproduce is refused on one line."""

from __future__ import annotations

import pytest
import torch
import transformers  # a test dependency: missing, these tests fail rather than skip

import zoo
from tests.interop.greedy import assert_greedy_decoding_matches
from zoo.config import ModelConfig
from zoo.interop.hf import CONVERTERS, UnsupportedConfig, from_hf, to_hf

V = 97
SIZES = dict(
    vocab_size=V,
    hidden_size=32,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    intermediate_size=40,
    moe_intermediate_size=12,
    shared_expert_intermediate_size=12,
    num_experts=4,
    num_experts_per_tok=2,
    full_attention_interval=1,
    max_position_embeddings=64,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    rms_norm_eps=1e-6,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)
# (transformers config fields, what zoo reads of them: model.ffn, moe_every, moe_first_dense, moe_shared)
CASES = {
    "moe-after-a-dense-layer": (dict(mlp_only_layers=[0]), ("moe", 1, 1, 1)),
    "moe-every-other-tied": (
        dict(
            decoder_sparse_step=2,
            norm_topk_prob=False,
            shared_expert_intermediate_size=24,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 5000.0, "partial_rotary_factor": 0.25},
        ),
        ("moe", 2, 0, 2),
    ),
    "dense": (dict(num_experts=0), ("dense", 1, 0, 0)),
}


def _qwen3_next(**kw):
    """A random Qwen3-Next: norms (zero-centred), router and shared-expert gate far from their
    starts, the other weights N(0, 0.1)."""
    config = transformers.Qwen3NextConfig(**{**SIZES, **kw})
    torch.manual_seed(0)
    model = transformers.Qwen3NextForCausalLM(config)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if "norm" in name or name.endswith(("mlp.gate.weight", "shared_expert_gate.weight")):
                tensor.normal_(0.0, 0.3)
            elif name in ("A_log", "dt_bias") or name.endswith((".A_log", ".dt_bias")):
                tensor.uniform_(0.1, 1.0)
            else:
                tensor.normal_(0.0, 0.1)
    return model.eval()


def _batch(padded: bool = True):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, V, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    if padded:
        mask[1, 8:] = 0  # right padding
        mask[2, 5:] = 0
    return ids, mask


def _max_diff(a, b, mask):
    return float((a - b).abs()[mask.bool()].max())


def _assert_same_weights(got: dict, expected: dict) -> None:
    """Every tensor equal; a zero-centred norm's within float32's rounding of w + 1 - 1."""
    assert got.keys() == expected.keys()
    for name, tensor in expected.items():
        atol = 1e-6 if "norm" in name else 0.0
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=atol, msg=name)


@pytest.mark.parametrize("case", sorted(CASES))
def test_converted_qwen3_next_computes_transformers_logits_and_exports_back(case):
    fields, (ffn, every, first, shared) = CASES[case]
    hf = _qwen3_next(**fields)
    model = from_hf(hf)
    cfg = model.config
    assert (cfg.attention, cfg.attn_gate, cfg.qk_norm) == ("full", "elementwise", "head")
    assert cfg.position.rotary_fraction == hf.config.rope_parameters["partial_rotary_factor"]
    assert (cfg.ffn, cfg.moe_every, cfg.moe_first_dense, cfg.moe_shared) == (ffn, every, first, shared)
    assert cfg.tie_embeddings == bool(hf.config.tie_word_embeddings)
    ids, mask = _batch()
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=mask).logits
        assert _max_diff(model(ids, attention_mask=mask).logits, theirs, mask) <= 1e-4
    back = to_hf(model)
    assert type(back).__name__ == "Qwen3NextForCausalLM"
    assert back.config.layer_types == hf.config.layer_types
    _assert_same_weights(back.state_dict(), hf.state_dict())
    with torch.no_grad():
        assert _max_diff(back(input_ids=ids, attention_mask=mask).logits, theirs, mask) <= 1e-4


def _zoo_qwen3_next(**kw) -> ModelConfig:
    """A zoo composition of the family: partial RoPE, gated attention with QK-norm, mixtures past
    a dense first layer with a gated shared expert."""
    keys = dict(
        family="decoder_only",
        position={"kind": "rope", "rotary_fraction": 0.5},
        norm="pre",
        norm_type="rmsnorm",
        activation="swiglu",
        bias=False,
        dropout=0.0,
        d_model=32,
        n_heads=4,
        n_kv_heads=2,
        head_dim=8,
        n_layers=3,
        d_ff=40,
        vocab_size=V,
        max_seq_len=64,
        norm_eps=1e-6,
        qk_norm="head",
        attn_gate="elementwise",
        ffn="moe",
        moe_experts=4,
        moe_top_k=2,
        moe_d_ff=12,
        moe_shared=1,
        moe_shared_gate="sigmoid",
        moe_first_dense=1,
    )
    return ModelConfig(**{**keys, **kw})


def test_a_zoo_model_exports_to_qwen3_next_with_its_logits_and_comes_back_with_its_weights():
    """zoo's own weights (norms moved off 1, so that the w + 1 of transformers' norms shows)."""
    torch.manual_seed(1)
    model = zoo.build_model(_zoo_qwen3_next()).eval()
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            if "norm" in name:
                tensor.normal_(1.0, 0.3)
    hf = to_hf(model)
    assert type(hf).__name__ == "Qwen3NextForCausalLM" and hf.config.mlp_only_layers == [0]
    ids, mask = _batch()
    with torch.no_grad():
        ours = model(ids, attention_mask=mask).logits
        assert _max_diff(hf(input_ids=ids, attention_mask=mask).logits, ours, mask) <= 1e-4
    again = from_hf(hf)
    assert again.config == model.config
    _assert_same_weights(again.state_dict(), model.state_dict())


def test_a_saved_directory_loads_for_init_from(tmp_path):
    """`init_from=hf:DIR` reads what `save_pretrained` writes: the model of `model_config(DIR)`,
    with the logits of the model saved."""
    from zoo.interop.hf.pretrained import load_pretrained, model_config

    hf = _qwen3_next(**CASES["moe-after-a-dense-layer"][0])
    hf.save_pretrained(tmp_path)
    model, _ = load_pretrained(tmp_path)
    assert model.config == model_config(tmp_path)
    ids, mask = _batch(padded=False)
    with torch.no_grad():
        assert _max_diff(model(ids).logits, hf(input_ids=ids).logits, mask) <= 1e-4


@pytest.mark.parametrize(
    "change",
    [{"moe_shared_gate": "none"}, {"attn_gate": "none"}, {"position": {"kind": "rope", "rotary_fraction": 1.0}}],
    ids=["ungated-shared-expert", "ungated-attention", "whole-head-rope"],
)
def test_what_qwen3_next_lacks_or_has_otherwise_does_not_export_as_it(change):
    """Without the shared experts' gate or the attention's, zoo's composition is not Qwen3-Next;
    RoPE over whole heads is (partial_rotary_factor 1.0) and computes the same in transformers."""
    cfg = _zoo_qwen3_next(**change)
    matches = CONVERTERS["qwen3_next"].matches(cfg)
    assert matches == ("position" in change)
    if not matches:
        with pytest.raises(UnsupportedConfig, match="qwen3_next"):
            CONVERTERS["qwen3_next"].to_hf(zoo.build_model(cfg))
        return
    model = zoo.build_model(cfg).eval()
    ids, mask = _batch()
    with torch.no_grad():
        ours = model(ids, attention_mask=mask).logits
        assert _max_diff(to_hf(model)(input_ids=ids, attention_mask=mask).logits, ours, mask) <= 1e-4


@pytest.mark.parametrize(
    "fields,named",
    [
        (dict(attention_bias=True), "attention_bias"),
        (dict(shared_expert_intermediate_size=18), "shared_expert_intermediate_size=18"),
        (dict(mlp_only_layers=[1]), "mlp_only_layers=[1]"),
        (dict(layer_types=["linear_attention", "full_attention", "full_attention", "linear_attention"]), "layer_types"),
    ],
    ids=["attention-bias", "shared-width", "dense-layers", "layer-pattern"],
)
def test_what_zoo_cannot_reproduce_is_refused_on_one_line_naming_it(fields, named):
    with pytest.raises(UnsupportedConfig) as refused:
        from_hf(_qwen3_next(**fields))
    assert named in str(refused.value) and "\n" not in str(refused.value)


HYBRID = dict(
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=8,
    linear_value_head_dim=6,
    linear_conv_kernel_dim=4,
    mlp_only_layers=[0],
)


@pytest.mark.parametrize("every", [2, 4], ids=["1:1", "3:1"])
def test_the_hybrid_of_gated_deltanet_and_full_attention_computes_transformers_logits_and_exports_back(every):
    """Gated DeltaNet layers with every k-th full attention (Qwen3-Next: 3:1), as
    model.attention=gated_deltanet model.global_every=k; the Gated DeltaNet's weights move by name."""
    hf = _qwen3_next(full_attention_interval=every, **HYBRID)
    assert hf.config.layer_types == (["linear_attention"] * (every - 1) + ["full_attention"]) * (4 // every)
    model = from_hf(hf)
    assert (model.config.attention, model.config.global_every) == ("gated_deltanet", every)
    ids, mask = _batch(padded=False)
    with torch.no_grad():
        theirs = hf(input_ids=ids).logits
        assert _max_diff(model(ids).logits, theirs, mask) <= 1e-4
    back = to_hf(model)
    assert back.config.layer_types == hf.config.layer_types
    _assert_same_weights(back.state_dict(), hf.state_dict())
    with torch.no_grad():
        assert _max_diff(back(input_ids=ids).logits, theirs, mask) <= 1e-4


def test_a_composed_hybrid_exports_to_qwen3_next_with_its_logits():
    """zoo's own hybrid, 3:1 with the Gated DeltaNet's widths left to the model's defaults but the
    value heads (twice the key heads, as Qwen3-Next), exported: transformers computes its logits."""
    cfg = _zoo_qwen3_next(n_layers=4, attention="gated_deltanet", global_every=4, linear_value_heads=8)
    torch.manual_seed(2)
    model = zoo.build_model(cfg).eval()
    hf = to_hf(model)
    assert hf.config.layer_types == ["linear_attention"] * 3 + ["full_attention"]
    assert (hf.config.linear_num_key_heads, hf.config.linear_num_value_heads) == (4, 8)
    ids, mask = _batch(padded=False)
    with torch.no_grad():
        assert _max_diff(hf(input_ids=ids).logits, model(ids).logits, mask) <= 1e-4


@pytest.mark.parametrize("every", [1, 4], ids=["full-attention", "hybrid-3:1"])
def test_greedy_decoding_with_the_cache_matches_transformers(every):
    """zoo's cached greedy tokens are its uncached ones and transformers' `generate`'s (its
    cache: keys and values, and for Gated DeltaNet layers their convolution and recurrent state)."""
    hf = _qwen3_next(full_attention_interval=every, **HYBRID)
    model = from_hf(hf)
    ids = torch.randint(0, V, (2, 5), generator=torch.Generator().manual_seed(1))
    assert_greedy_decoding_matches(model, hf, ids)
