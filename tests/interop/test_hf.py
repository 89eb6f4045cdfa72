"""Hugging Face parity: each supported family is built in `transformers` from a small random
config (no downloads), converted, and must give the same logits on a padded batch (≤ 1e-4,
float32), the same after the round trip zoo -> HF, and the same greedy tokens with the KV
cache as `transformers`' own `generate`."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="Hugging Face parity needs the test extra 'transformers'")

import zoo  # noqa: E402
from zoo.generate import generate  # noqa: E402
from zoo.interop.hf import UnsupportedConfig, from_hf, to_hf  # noqa: E402

V = 97


def _llama(tie: bool = False, **kw):
    config = transformers.LlamaConfig(
        vocab_size=V, hidden_size=32, intermediate_size=72, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=tie,
        initializer_range=0.1, bos_token_id=None, eos_token_id=None, pad_token_id=None, **kw)
    return transformers.LlamaForCausalLM(config).eval()


def _gpt2(activation: str = "gelu_new", **kw):
    config = transformers.GPT2Config(
        vocab_size=V, n_positions=64, n_embd=32, n_layer=2, n_head=4, activation_function=activation,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, initializer_range=0.1, bos_token_id=None,
        eos_token_id=None, **kw)
    return transformers.GPT2LMHeadModel(config).eval()


FAMILIES = {
    "llama": _llama,
    "llama-tied": lambda: _llama(tie=True),
    "llama-linear-rope": lambda: _llama(rope_parameters={"rope_type": "linear", "rope_theta": 500.0, "factor": 2.0}),
    "gpt2": _gpt2,
    "gpt2-relu": lambda: _gpt2("relu"),
}


def _batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, V, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0  # right padding: learned positions then agree on every real token
    mask[2, 5:] = 0
    return ids, mask


def _max_diff(a, b, mask):
    keep = mask.bool()
    return float((a[keep] - b[keep]).abs().max())


@pytest.fixture(params=sorted(FAMILIES))
def hf_model(request):
    torch.manual_seed(0)
    return FAMILIES[request.param]()


def test_logits_match_on_a_padded_batch(hf_model):
    ids, mask = _batch()
    model = from_hf(hf_model)
    with torch.no_grad():
        expected = hf_model(input_ids=ids, attention_mask=mask).logits
        got = model(ids, attention_mask=mask).logits
    assert got.shape == expected.shape
    assert _max_diff(got, expected, mask) <= 1e-4


def test_round_trip_back_to_transformers(hf_model):
    ids, mask = _batch()
    back = to_hf(from_hf(hf_model))
    assert type(back) is type(hf_model)
    with torch.no_grad():
        assert _max_diff(back(input_ids=ids, attention_mask=mask).logits,
                         hf_model(input_ids=ids, attention_mask=mask).logits, mask) <= 1e-4


def test_greedy_generation_gives_the_same_tokens(hf_model):
    model = from_hf(hf_model)
    prompt = torch.randint(1, V, (1, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        theirs = hf_model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=20,
                                   do_sample=False, num_beams=1, eos_token_id=None, pad_token_id=0)
        ours = generate(model, prompt, max_new_tokens=20, eos_id=None)
    assert ours.tolist() == theirs[:, prompt.shape[1]:].tolist()


@pytest.mark.parametrize("overrides", [
    ["model=llama", "model.d_model=32", "model.n_heads=4", "model.n_kv_heads=2", "model.n_layers=2",
     "model.vocab_size=97", "model.d_ff=64"],
    ["model=gpt", "model.activation=gelu_tanh", "model.d_model=32", "model.n_heads=4", "model.n_layers=2",
     "model.vocab_size=97"],
])
def test_a_composed_zoo_model_exports(overrides):
    """A model composed in zoo (not converted from HF) exports to the matching family."""
    model = zoo.build_model(zoo.compose(overrides).model).eval()
    ids, mask = _batch()
    hf = to_hf(model)
    with torch.no_grad():
        assert _max_diff(hf(input_ids=ids, attention_mask=mask).logits,
                         model(ids, attention_mask=mask).logits, mask) <= 1e-4


@pytest.mark.parametrize("build, field", [
    (lambda: _llama(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
                                     "original_max_position_embeddings": 32}), "rope_type='yarn'"),
    (lambda: _llama(attention_bias=True), "attention_bias=True"),
    (lambda: _llama(hidden_act="gelu"), "hidden_act='gelu'"),
    (lambda: _gpt2(scale_attn_by_inverse_layer_idx=True), "scale_attn_by_inverse_layer_idx=True"),
    (lambda: _gpt2("silu"), "activation_function='silu'"),
])
def test_an_unsupported_config_names_the_field(build, field):
    with pytest.raises(UnsupportedConfig, match=field.replace("(", r"\(")):
        from_hf(build())


def test_a_composition_without_a_family_is_refused():
    model = zoo.build_model(zoo.compose(["model=llama", "model/position=alibi", "model.d_model=32",
                                         "model.n_heads=4", "model.n_layers=1"]).model)
    with pytest.raises(UnsupportedConfig, match="matches no supported"):
        to_hf(model)
