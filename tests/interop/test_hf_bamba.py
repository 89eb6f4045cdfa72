"""Bamba parity with transformers' `BambaForCausalLM`, whole models built from small random
configs (D 32, 4 heads over 2 key/value heads, Mamba 2 with 8 heads of 8 in 2 groups, a state of
8, chunks of 4; no downloads), every weight away from its start. Its attention layers every k-th
(model.global_every), elsewhere (model.layer_pattern) or absent: converted to zoo, the same
logits on a batch with right and left padding (float32, <= 1e-4; unpadded where every layer is
Mamba 2: transformers' Bamba then fails to build its padding mask); exported back, the same
weights and logits; a zoo hybrid composed in zoo exports with its logits; the greedy tokens with
zoo's cache are its uncached ones and transformers' `generate`'s; what zoo cannot reproduce is
refused on one line."""

from __future__ import annotations

import pytest
import torch
import transformers  # a test dependency: missing, these tests fail rather than skip

import zoo
from tests.interop.greedy import assert_greedy_decoding_matches
from zoo.interop.hf import UnsupportedConfig, from_hf, to_hf

V = 97
SIZES = dict(
    vocab_size=V,
    hidden_size=32,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=40,
    max_position_embeddings=64,
    attn_layer_indices=[1, 3],
    mamba_n_heads=8,
    mamba_d_head=8,
    mamba_n_groups=2,
    mamba_d_state=8,
    mamba_d_conv=4,
    mamba_expand=2,
    mamba_chunk_size=4,
    rms_norm_eps=1e-6,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)
# attn_layer_indices -> what zoo reads of them: model.attention, model.global_every, model.layer_pattern
CASES = {
    "1:1": (dict(), ("mamba2", 2, None)),
    "3:1-tied": (dict(attn_layer_indices=[3], tie_word_embeddings=True), ("mamba2", 4, None)),
    "pattern": (dict(attn_layer_indices=[0]), ("full", None, ("full", "mamba2", "mamba2", "mamba2"))),
    "all-mamba": (dict(attn_layer_indices=None, mamba_d_conv=3), ("mamba2", None, None)),
}


def _bamba(**kw):
    """A random Bamba: norms around 1, decays spread, the other weights N(0, 0.1)."""
    config = transformers.BambaConfig(**{**SIZES, **kw})
    torch.manual_seed(0)
    model = transformers.BambaForCausalLM(config)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if "norm" in name:
                tensor.normal_(1.0, 0.3)
            elif name.endswith((".A_log", ".dt_bias")):
                tensor.uniform_(0.1, 1.0)
            else:
                tensor.normal_(0.0, 0.1)
    return model.eval()


def _batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, V, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0  # right padding
    mask[2, :4] = 0  # left padding
    return ids, mask


def _max_diff(a, b, mask):
    return float((a - b).abs()[mask.bool()].max())


@pytest.mark.parametrize("case", sorted(CASES))
def test_converted_bamba_computes_transformers_logits_and_exports_back(case):
    fields, (attention, every, pattern) = CASES[case]
    hf = _bamba(**fields)
    model = from_hf(hf)
    cfg = model.config
    assert (cfg.attention, cfg.global_every, cfg.layer_pattern) == (attention, every, pattern)
    assert cfg.position.rotary_fraction == 0.5 and cfg.conv_kernel == hf.config.mamba_d_conv
    assert (cfg.ssm_heads, cfg.ssm_head_dim, cfg.ssm_groups, cfg.ssm_state) == (8, 8, 2, 8)
    ids, mask = _batch()
    # transformers' Bamba builds no padding mask without an attention layer (its cache has none to ask)
    masked = bool(hf.config.attn_layer_indices)
    if not masked:
        mask = torch.ones_like(ids)
    hf_mask = mask if masked else None
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=hf_mask, use_cache=False).logits
        assert theirs.abs().max() > 0.1
        assert _max_diff(model(ids, attention_mask=mask).logits, theirs, mask) <= 1e-4
    back = to_hf(model)
    assert type(back).__name__ == "BambaForCausalLM"
    assert back.config.layers_block_type == hf.config.layers_block_type
    assert back.state_dict().keys() == hf.state_dict().keys()
    for name, tensor in hf.state_dict().items():
        assert torch.equal(back.state_dict()[name], tensor), name
    with torch.no_grad():
        assert _max_diff(back(input_ids=ids, attention_mask=hf_mask, use_cache=False).logits, theirs, mask) <= 1e-4


def test_a_composed_hybrid_exports_to_bamba_with_its_logits():
    """zoo's own hybrid (Mamba 2 with every 2nd layer full attention), its weights drawn by zoo's
    starts, exported: transformers computes its logits."""
    cfg = zoo.compose(
        ["model=bamba", "model.d_model=32", "model.n_heads=4", "model.n_layers=4", "model.vocab_size=97"]
        + ["model.global_every=2", "model.ssm_head_dim=16", "model.ssm_state=16", "model.ssm_chunk=8"]
    ).model
    torch.manual_seed(2)
    model = zoo.build_model(cfg).eval()
    hf = to_hf(model)
    assert hf.config.attn_layer_indices == [1, 3]
    ids, mask = _batch()
    with torch.no_grad():
        assert (
            _max_diff(hf(input_ids=ids, attention_mask=mask).logits, model(ids, attention_mask=mask).logits, mask)
            <= 1e-4
        )


@pytest.mark.parametrize("case", ["1:1", "pattern"])
def test_greedy_decoding_with_the_cache_matches_transformers(case):
    """zoo's cached greedy tokens are its uncached ones and transformers' `generate`'s (its
    cache: keys and values, and for Mamba 2 layers their convolution and SSM state)."""
    hf = _bamba(**CASES[case][0])
    model = from_hf(hf)
    ids = torch.randint(0, V, (2, 5), generator=torch.Generator().manual_seed(1))
    assert_greedy_decoding_matches(model, hf, ids)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        (dict(attention_bias=True), "BambaConfig.attention_bias=True is not supported"),
        (dict(mlp_bias=True), "BambaConfig.mlp_bias=True is not supported"),
        (dict(mamba_proj_bias=True), "BambaConfig.mamba_proj_bias=True is not supported"),
        (dict(mamba_conv_bias=False), "BambaConfig.mamba_conv_bias=False is not supported"),
        (dict(time_step_limit=(0.0, 1.0)), r"BambaConfig.time_step_limit=\(0.0, 1.0\) is not supported"),
    ],
)
def test_what_zoo_cannot_reproduce_is_refused_on_one_line_naming_it(fields, named):
    hf = transformers.BambaForCausalLM(transformers.BambaConfig(**{**SIZES, **fields}))
    with pytest.raises(UnsupportedConfig, match=named) as refused:
        from_hf(hf)
    assert "\n" not in str(refused.value)
