"""GPT-NeoX parity: transformers' GPTNeoXForCausalLM from a small random config (no downloads),
with its parallel residual (`use_parallel_residual=True`, zoo's model.block=parallel_two_norms)
and without it (sequential), converted to zoo: the same logits on a padded batch (float32,
≤ 1e-4), the same after the round trip back, and the same greedy tokens with the KV cache."""

from __future__ import annotations

import pytest
import torch
import transformers  # a test dependency: missing, these tests fail rather than skip

import zoo  # noqa: E402
from zoo.interop.hf import UnsupportedConfig, from_hf, to_hf  # noqa: E402
from zoo.models.generate import generate  # noqa: E402

V = 97


def _randomise(model):
    """LayerNorm gains and every bias away from their initial 1 and 0, so a misplaced one shows."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "layernorm" in name or "layer_norm" in name:
                p.normal_(1.0 if name.endswith("weight") else 0.0, 0.3)
    return model


def _neox(parallel: bool = True, tie: bool = False, activation: str = "gelu", **kw):
    torch.manual_seed(0)
    config = transformers.GPTNeoXConfig(
        vocab_size=V,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=72,
        hidden_act=activation,
        max_position_embeddings=64,
        layer_norm_eps=1e-5,
        use_parallel_residual=parallel,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0},
        hidden_dropout=0.0,
        attention_dropout=0.0,
        initializer_range=0.1,
        tie_word_embeddings=tie,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        **kw,
    )
    return _randomise(transformers.GPTNeoXForCausalLM(config).eval())


def _batch():
    ids = torch.randint(0, V, (2, 9))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # left padding
    return ids, mask


def _hf_logits(hf, ids, mask):
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return hf(input_ids=ids, attention_mask=mask, position_ids=positions).logits


@pytest.mark.parametrize(
    "parallel, tie, activation", [(True, False, "gelu"), (False, False, "gelu"), (True, True, "relu")]
)
def test_logits_match_and_round_trip(parallel, tie, activation):
    hf = _neox(parallel, tie, activation)
    ours = from_hf(hf)
    assert ours.config.block.value == ("parallel_two_norms" if parallel else "sequential")
    ids, mask = _batch()
    with torch.no_grad():
        want = _hf_logits(hf, ids, mask)
        got = ours(ids, attention_mask=mask).logits
        real = mask.bool()
        torch.testing.assert_close(got[real], want[real], rtol=1e-4, atol=1e-4)
        back = to_hf(ours)
        assert isinstance(back, transformers.GPTNeoXForCausalLM)
        assert back.config.use_parallel_residual == parallel
        torch.testing.assert_close(_hf_logits(back, ids, mask)[real], want[real], rtol=1e-4, atol=1e-4)


def test_greedy_generation_gives_the_same_tokens():
    hf = _neox()
    ours = from_hf(hf)
    prompt = torch.randint(0, V, (1, 5))
    with torch.no_grad():
        want = hf.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0)[:, 5:]
    got = generate(ours, prompt, max_new_tokens=8, bos_id=None, eos_id=None)
    assert torch.equal(got, want)


def test_a_zoo_parallel_two_norms_model_exports_to_gpt_neox():
    model = zoo.build_model(
        dict(
            family="decoder_only",
            position={"kind": "rope"},
            norm="pre",
            norm_type="layernorm",
            activation="gelu",
            block="parallel_two_norms",
            d_model=32,
            n_heads=4,
            n_layers=2,
            vocab_size=V,
            max_seq_len=64,
            tie_embeddings=False,
            init_std=0.1,
        )
    ).eval()
    _randomise(model)
    hf = to_hf(model)
    ids, mask = _batch()
    with torch.no_grad():
        torch.testing.assert_close(
            _hf_logits(hf, ids, mask)[mask.bool()],
            model(ids, attention_mask=mask).logits[mask.bool()],
            rtol=1e-4,
            atol=1e-4,
        )


@pytest.mark.parametrize("kw, field", [({"attention_bias": False}, "attention_bias")])
def test_what_zoo_cannot_reproduce_is_refused_naming_the_field(kw, field):
    torch.manual_seed(0)
    config = transformers.GPTNeoXConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64, **kw
    )
    with pytest.raises(UnsupportedConfig, match=field):
        from_hf(transformers.GPTNeoXForCausalLM(config))


@pytest.mark.parametrize(
    "option", [{"qk_norm": "head"}, {"attn_softcap": 5.0}, {"final_softcap": 5.0}, {"block": "parallel"}]
)
def test_a_block_option_gpt_neox_lacks_matches_no_family(option):
    model = zoo.build_model(
        dict(
            family="decoder_only",
            position={"kind": "rope"},
            norm="pre",
            norm_type="layernorm",
            activation="gelu",
            d_model=32,
            n_heads=4,
            n_layers=1,
            vocab_size=V,
            max_seq_len=64,
            **option,
        )
    )
    with pytest.raises(UnsupportedConfig, match="matches no supported"):
        to_hf(model)
