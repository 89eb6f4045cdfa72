"""gpt-oss parity with transformers' `GptOssForCausalLM`, built from a small random config (2
layers, sliding then full, 4 experts, top-2, D 32; default RoPE; no downloads), converted to zoo:
the same logits on a padded batch (float32, <= 1e-4), with the experts' clamps reached and not;
the same weights and logits after the round trip back; the same greedy tokens with zoo's KV
cache; and YaRN, which zoo does not read, refused on one line."""

from __future__ import annotations

import pytest
import torch
import transformers  # a test dependency: missing, these tests fail rather than skip

from tests.interop.greedy import assert_greedy_decoding_matches
from zoo.config.facts.moe_experts import SWIGLU_LIMIT
from zoo.interop.hf import CONVERTERS, UnsupportedConfig, from_hf, to_hf

V = 97
SIZES = dict(
    vocab_size=V,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    intermediate_size=24,
    num_local_experts=4,
    num_experts_per_tok=2,
    sliding_window=4,
    max_position_embeddings=64,
    rope_parameters={"rope_type": "default", "rope_theta": 150000.0},
    initializer_range=0.1,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)


def _gpt_oss(expert_std: float = 0.1, **kw):
    """A random gpt-oss whose norms, biases, sinks and router are away from their defaults (a
    misplaced one shows); `expert_std` scales the experts' matrices (large: the clamps act)."""
    config = transformers.GptOssConfig(**{**SIZES, **kw})
    torch.manual_seed(0)
    model = transformers.GptOssForCausalLM(config)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if "norm" in name:
                tensor.normal_(0.0, 0.1).add_(1.0)
            elif name.endswith(("bias", "sinks")) or "router.weight" in name:
                tensor.normal_(0.0, 0.5)
            elif name.endswith(("gate_up_proj", "down_proj")):
                tensor.normal_(0.0, expert_std)
    return model.eval()


def _batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, V, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0  # right padding
    mask[2, 5:] = 0
    return ids, mask


def _max_diff(a, b, mask):
    return float((a - b).abs()[mask.bool()].max())


@pytest.mark.parametrize("expert_std", [0.1, 2.0], ids=["unclamped", "clamped"])
def test_converted_gpt_oss_computes_transformers_logits_and_exports_back(expert_std):
    hf = _gpt_oss(expert_std)
    model = from_hf(hf)
    cfg = model.config
    assert (cfg.attn_sink, cfg.moe_expert, cfg.attention, cfg.window, cfg.global_every) == (
        "learned",
        "gpt_oss",
        "sliding",
        4,
        2,
    )
    ids, mask = _batch()
    seen = []  # the first mixture layer's input (B, T, D)
    hook = hf.model.layers[0].mlp.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=mask).logits
        ours = model(ids, attention_mask=mask).logits
    hook.remove()
    gate_up = torch.einsum("btd,edf->ebtf", seen[0], hf.model.layers[0].mlp.experts.gate_up_proj)  # (E, B, T, 2·F)
    assert bool(gate_up.abs().max() > SWIGLU_LIMIT) == (expert_std > 1)  # the clamped case reaches the clamps
    assert _max_diff(theirs, ours, mask) <= 1e-4
    back = to_hf(model)
    assert type(back).__name__ == "GptOssForCausalLM"
    for name, tensor in hf.state_dict().items():
        torch.testing.assert_close(back.state_dict()[name], tensor, rtol=0, atol=0, msg=name)
    with torch.no_grad():
        assert _max_diff(back(input_ids=ids, attention_mask=mask).logits, theirs, mask) == 0.0


def test_every_layer_full_or_sliding_converts_as_its_layer_types():
    full = from_hf(_gpt_oss(layer_types=["full_attention"] * 2))
    sliding = from_hf(_gpt_oss(layer_types=["sliding_attention"] * 2))
    assert full.config.attention == "full" and full.config.window is None
    assert (sliding.config.attention, sliding.config.global_every) == ("sliding", None)
    ids, mask = _batch()
    with torch.no_grad():
        for model, layers in ((full, ["full_attention"] * 2), (sliding, ["sliding_attention"] * 2)):
            theirs = _gpt_oss(layer_types=layers)(input_ids=ids, attention_mask=mask).logits
            assert _max_diff(theirs, model(ids, attention_mask=mask).logits, mask) <= 1e-4


def test_greedy_decoding_with_the_cache_matches_transformers():
    hf = _gpt_oss(2.0)
    model = from_hf(hf)
    ids = torch.randint(3, V, (2, 5), generator=torch.Generator().manual_seed(1))
    assert_greedy_decoding_matches(model, hf, ids)


def test_yarn_and_other_swiglu_constants_are_refused_on_one_line():
    converter = CONVERTERS["gpt_oss"]
    yarn = transformers.GptOssConfig(**{**SIZES, "rope_parameters": None})  # gpt-oss's own: YaRN x 32
    for config, named in (
        (yarn, "truncate=False"),  # YaRN with transformers' truncate=True only
        (transformers.GptOssConfig(**{**SIZES, "swiglu_limit": 5.0}), "swiglu_limit"),
    ):
        with pytest.raises(UnsupportedConfig) as refused:
            converter.zoo_config(config)
        assert named in str(refused.value) and "\n" not in str(refused.value)
