"""Gated DeltaNet (`model.attention=gated_deltanet`, `zoo.nn.gated_deltanet`): the chunked form
equal to the token-by-token rule, the module equal to transformers' `Qwen3NextGatedDeltaNet`
(prefill and decoding steps against its cache), packed documents equal to each alone, cached
decoding (growing and static, left-padded, compiled once, beams reordered) equal to the whole
forward, a state that does not grow with the context, and its starts."""

from __future__ import annotations

import math

import pytest
import torch

import zoo
from tests.conftest import sharp, tiny
from zoo.config import ModelConfig
from zoo.models.limits import kv_cache_bytes
from zoo.nn.gated_deltanet import GatedDeltaNet, chunked_rule, recurrent_rule
from zoo.nn.recurrent_state import RecurrentState

HYBRID = dict(attention="gated_deltanet", global_every=2, n_layers=4, max_seq_len=64)


def _rule_inputs(T: int, Hk: int = 2, Hv: int = 4, dk: int = 8, dv: int = 6):
    q, k = torch.randn(2, T, Hk, dk), torch.randn(2, T, Hk, dk)
    v = torch.randn(2, T, Hv, dv)
    g = -torch.rand(2, T, Hv) * 2  # log decays <= 0
    beta = torch.rand(2, T, Hv)
    return q, k, v, g, beta


@pytest.mark.parametrize("T", [1, 40, 64, 150])
@pytest.mark.parametrize("initial", [False, True], ids=["zeros", "carried"])
def test_the_chunked_form_is_the_rule_token_by_token(T, initial):
    """Chunks of 64 (one shorter, several, a padded last one) give the outputs and the final
    state of the recurrence, from zeros and from a carried state; value heads grouped 2 to a key head."""
    q, k, v, g, beta = _rule_inputs(T)
    start = torch.randn(2, 4, 8, 6) if initial else None
    out, state = chunked_rule(q, k, v, g, beta, start)
    want, want_state = recurrent_rule(q, k, v, g, beta, start)
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(state, want_state, atol=1e-5, rtol=1e-4)


def test_the_chunked_form_resets_at_a_document_start():
    """`resets` zeroes the state before a token: the tokens after it are those of a fresh run."""
    q, k, v, g, beta = _rule_inputs(90)
    resets = torch.zeros(2, 90, dtype=torch.bool)
    resets[:, 70] = True  # a document starts at 70, inside the second chunk
    out, _ = chunked_rule(q, k, v, g, beta, None, resets=resets)
    first, _ = recurrent_rule(*(t[:, :70] for t in (q, k, v, g, beta)), None)
    second, _ = recurrent_rule(*(t[:, 70:] for t in (q, k, v, g, beta)), None)
    torch.testing.assert_close(out, torch.cat([first, second], dim=1), atol=1e-5, rtol=1e-4)


def test_the_module_is_transformers_qwen3_next_gated_deltanet():
    """Same parameter names and shapes as `Qwen3NextGatedDeltaNet`: its weights load as they are,
    and the outputs agree in float32 within 1e-4 over a prefill of 70 tokens (two chunks) and
    then one-token steps, each side through its own cache."""
    transformers = pytest.importorskip("transformers", reason="the hf extra holds the reference")
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

    hf_cfg = transformers.Qwen3NextConfig(
        hidden_size=32,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=8,
        linear_value_head_dim=6,
        linear_conv_kernel_dim=4,
        num_hidden_layers=1,
        layer_types=["linear_attention"],
        rms_norm_eps=1e-6,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=16,
    )
    theirs = Qwen3NextGatedDeltaNet(hf_cfg, 0).float().eval()
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_(0.0, 0.3)  # away from the starts, so every parameter shows
    cfg = ModelConfig(
        **tiny(
            d_model=32,
            n_layers=1,
            attention="gated_deltanet",
            linear_key_heads=2,
            linear_value_heads=4,
            linear_key_dim=8,
            linear_value_dim=6,
            norm_eps=1e-6,
        )
    )
    ours = GatedDeltaNet(cfg).eval()
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in theirs.state_dict().items()}
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(2, 74, 32)
    cache, state = transformers.DynamicCache(config=hf_cfg), RecurrentState()
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x), atol=1e-4, rtol=0)
        torch.testing.assert_close(ours(x[:, :70], state=state), theirs(x[:, :70], cache=cache), atol=1e-4, rtol=0)
        for t in range(70, 74):
            step = x[:, t : t + 1]
            torch.testing.assert_close(ours(step, state=state), theirs(step, cache=cache), atol=1e-4, rtol=0)
    assert state.length == 74


def test_packed_documents_are_each_document_alone():
    """data.document_mask: in a hybrid (recurrent and attention layers) the logits of two packed
    documents are those of each document run alone (the state reset at the boundary, the
    convolution kept within the document)."""
    model = zoo.build_model(tiny("decoder_only", "rope", **HYBRID)).eval()
    a, b = torch.randint(4, 37, (1, 9)), torch.randint(4, 37, (1, 14))
    packed = torch.cat([a, b], dim=1)
    documents = torch.tensor([[0] * 9 + [1] * 14])
    with torch.no_grad():
        got = model(packed, document_ids=documents).logits
        alone = torch.cat([model(a).logits, model(b).logits], dim=1)
    torch.testing.assert_close(got, alone, atol=1e-5, rtol=1e-4)


def _decode(model, ids, cache, prompt, padding=None):
    """The logits of a prompt, then one token at a time through `cache` (B, T, V)."""
    outs = [model(ids[:, :prompt], attention_mask=None if padding is None else padding[:, :prompt], cache=cache).logits]
    for t in range(prompt, ids.shape[1]):
        mask = None if padding is None else padding[:, : t + 1]
        outs.append(model(ids[:, t : t + 1], attention_mask=mask, cache=cache, use_cache=True).logits)
    return torch.cat(outs, dim=1)


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "left-padded"])
@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
def test_cached_decoding_is_the_whole_forward(static, padded):
    """Prompt then steps through the cache (recurrent states and the full layers' keys) give the
    whole forward's logits; a left-padded row's real tokens are those the padding leaves as they are."""
    T = 14
    model = zoo.build_model(tiny("decoder_only", "rope", **HYBRID)).eval()
    ids = torch.randint(4, 37, (2, T))
    padding = torch.ones(2, T, dtype=torch.long)
    padding[0, :4] = 0
    mask = padding if padded else None
    with torch.no_grad():
        reference = model(ids, attention_mask=mask).logits
        cache = model.new_cache(capacity=T if static else None)
        got = _decode(model, ids, cache, prompt=6, padding=mask)
    real = padding.bool() if padded else torch.ones(2, T, dtype=torch.bool)
    torch.testing.assert_close(got[real], reference[real], atol=1e-5, rtol=1e-4)
    assert cache.length == T and cache.static == static
    for layer, recurrent in zip(cache.layers, model.decoder.recurrent):
        assert (layer.state is not None) == recurrent
        assert (layer.self_attn.length == 0) == recurrent  # a recurrent layer keeps no keys


def test_a_left_padded_row_is_the_row_alone():
    """Zeroed inputs leave the state at zero: a row after 5 pads gives the logits it gives alone."""
    model = zoo.build_model(tiny("decoder_only", "none", **HYBRID)).eval()
    ids = torch.randint(4, 37, (1, 10))
    padded = torch.cat([torch.zeros(1, 5, dtype=torch.long), ids], dim=1)
    mask = torch.cat([torch.zeros(1, 5, dtype=torch.long), torch.ones(1, 10, dtype=torch.long)], dim=1)
    with torch.no_grad():
        torch.testing.assert_close(model(padded, attention_mask=mask).logits[:, 5:], model(ids).logits)


def test_a_static_step_is_one_graph():
    """The static cache's step writes the states in place from the device slot: traced once,
    never recompiled (what CUDA graphs replay), and equal to the whole forward."""
    import torch._dynamo

    prompt, steps = 5, 5
    model = zoo.build_model(tiny("decoder_only", "rope", **HYBRID)).eval()
    ids = torch.randint(4, 37, (2, prompt + steps))
    cache = model.new_cache(capacity=prompt + steps)
    with torch.no_grad():
        outs = [model(ids[:, :prompt], cache=cache, use_cache=True).logits]
        torch._dynamo.reset()
        step = torch.compile(model, backend="eager", fullgraph=True)
        with torch._dynamo.config.patch(error_on_recompile=True):
            for t in range(prompt, prompt + steps):
                outs.append(step(ids[:, t : t + 1], cache=cache, use_cache=True).logits)
        reference = model(ids).logits
    torch.testing.assert_close(torch.cat(outs, dim=1), reference, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_generation_is_the_same_with_every_cache(strategy):
    """Greedy and beam search (whose states are reordered) give the same tokens without a cache,
    with the growing cache and with the static one, on peaked weights."""
    from zoo.config.schema.generation import GenerationConfig
    from zoo.models.generate import generate

    model = zoo.build_model(sharp("decoder_only", "rope", **HYBRID)).eval()
    ids = torch.randint(4, 37, (2, 6))
    beams = {"num_beams": 2} if strategy == "beam" else {}
    out = [
        generate(
            model,
            ids,
            bos_id=2,
            eos_id=None,
            config=GenerationConfig(strategy=strategy, max_new_tokens=9, **beams, **c),
        )
        for c in ({"use_cache": False}, {}, {"static_cache": True})
    ]
    assert torch.equal(out[0], out[1]) and torch.equal(out[0], out[2])


@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
def test_the_state_does_not_grow_with_the_context(static):
    """Memory flat in the context: the recurrent layers' bytes after 4 tokens are their bytes after
    40, and `kv_cache_bytes` (what zoo-generate checks against free memory) counts them, besides
    the full layers' keys and values, which grow."""
    cfg = ModelConfig(**tiny("decoder_only", "rope", **{**HYBRID, "max_seq_len": 64}))
    model = zoo.build_model(cfg).eval()
    ids = torch.randint(4, 37, (2, 41))
    cache = model.new_cache(capacity=41 if static else None)
    with torch.no_grad():
        model(ids[:, :4], cache=cache, use_cache=True)
        early = cache.state_bytes()
        for t in range(4, 40):
            model(ids[:, t : t + 1], cache=cache, use_cache=True)
    assert early > 0 and cache.state_bytes() == early
    itemsize = 4  # float32
    attention_layers = model.decoder.recurrent.count(False)
    keys = attention_layers * 2 * cfg.n_kv_heads * cfg.head_dim * itemsize * 40 * 2  # K and V of 40 positions, 2 rows
    assert kv_cache_bytes(cfg, 2, 4, 37, itemsize) == keys + early
    all_recurrent = ModelConfig(**tiny("decoder_only", "rope", attention="gated_deltanet"))
    assert kv_cache_bytes(all_recurrent, 2, 4, 10, itemsize) == kv_cache_bytes(all_recurrent, 2, 4, 10_000, itemsize)


def test_the_parameters_start_as_qwen3_next_starts_them():
    """dt_bias at one, A = exp(A_log) spread over (0.01, 16) per head, the norm's gain at one, and
    each drawn from its own generator (the same seed, the same values)."""
    cfg = tiny(attention="gated_deltanet", n_heads=8, d_model=32)
    first, second = zoo.build_model(cfg, init_seed=3), zoo.build_model(cfg, init_seed=3)
    mixer = first.decoder.layers[0].self_attn
    assert isinstance(mixer, GatedDeltaNet)
    assert torch.equal(mixer.dt_bias, torch.ones(8)) and torch.equal(mixer.norm.weight, torch.ones(mixer.dv))
    A = mixer.A_log.exp()
    assert ((A > 0.01) & (A < 16)).all() and A.std() > 1  # spread, not one constant
    assert torch.equal(mixer.A_log, second.decoder.layers[0].self_attn.A_log)
    assert not torch.equal(mixer.A_log, first.decoder.layers[1].self_attn.A_log)  # each layer its own draw
    assert math.isclose(mixer.conv1d.weight.std().item(), 0.02, rel_tol=0.3)
