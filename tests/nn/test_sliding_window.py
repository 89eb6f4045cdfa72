"""Sliding-window attention (`model.attention=sliding`): the band mask by hand and against
transformers' own mask functions, a window that covers the sequence equal to full attention, a
one-layer model equal to full attention over the window alone, training with local and global
layers and a covering window equal to full attention (run on every row of the design of
tests/models/test_variants.py), KV-cached decoding equal to the whole forward past the window
(growing and static caches, with and without padding) while the caches keep only the window,
FlexAttention equal to SDPA, and the FLOPs and KV-cache bytes counting the window."""

from __future__ import annotations

import pytest
import torch

import zoo
from tests.conftest import CAUSAL_FAMILIES, tiny
from tests.covering import cases, model_axes
from tests.nn.windows import pair
from zoo.config import ConfigError, ModelConfig
from zoo.config.facts.attention import stack_windows
from zoo.config.schema.model import PositionKind
from zoo.interop.hf import UnsupportedConfig, to_hf
from zoo.models.limits import kv_cache_bytes
from zoo.nn import flex as flex_module
from zoo.nn.cache import SlidingKVCache, SlidingStaticKVCache
from zoo.nn.flex import is_block_mask
from zoo.nn.mask import attention_mask, band_mask_mod, in_band


def _band(q_len, k_len, window, causal=True, key_padding=None):
    return attention_mask(
        q_len=q_len, k_len=k_len, causal=causal, key_padding=key_padding, device=torch.device("cpu"), window=window
    )[0, 0]


def test_band_mask_by_hand():
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0],
            [1, 1, 0, 0, 0],
            [0, 1, 1, 0, 0],
            [0, 0, 1, 1, 0],
            [0, 0, 0, 1, 1],
        ],
        dtype=torch.bool,
    )  # window 2: a query sees itself and the key before it
    assert torch.equal(_band(5, 5, 2), expected)
    # the last 2 queries of 5 keys (a cache): keys 1..3 for query 3, keys 2..4 for query 4
    assert torch.equal(_band(2, 5, 3), torch.tensor([[0, 1, 1, 1, 0], [0, 0, 1, 1, 1]], dtype=torch.bool))
    bidirectional = torch.tensor(
        [
            [1, 1, 0, 0],
            [1, 1, 1, 0],
            [0, 1, 1, 1],
            [0, 0, 1, 1],
        ],
        dtype=torch.bool,
    )  # window 3 in an encoder: one key each side and itself
    assert torch.equal(_band(4, 4, 3, causal=False), bidirectional)


def test_band_is_transformers_sliding_window():
    """The convention of Gemma 2 / Mistral / Qwen2 in transformers: query i sees key j when
    j <= i and j > i - sliding_window."""
    from transformers.masking_utils import sliding_window_causal_mask_function

    for window in (1, 2, 3, 7):
        theirs = sliding_window_causal_mask_function(window)
        hf = torch.tensor(
            [
                [bool(theirs(torch.tensor(0), torch.tensor(0), torch.tensor(i), torch.tensor(j))) for j in range(9)]
                for i in range(9)
            ]
        )
        assert torch.equal(_band(9, 9, window), hf), window
        mod = band_mask_mod(window, causal=True)
        i, j = torch.arange(9)[:, None], torch.arange(9)[None, :]
        assert torch.equal(mod(0, 0, i, j), hf), window


def test_layer_pattern_is_gemma2s_layer_types():
    from transformers import Gemma2Config

    hf = Gemma2Config(num_hidden_layers=6).layer_types
    ours = stack_windows(ModelConfig(**tiny(attention="sliding", window=5, global_every=2, n_layers=6)), 6)
    assert ["sliding_attention" if w else "full_attention" for w in ours] == hf
    assert stack_windows(ModelConfig(**tiny(attention="sliding", window=5, n_layers=3)), 3) == [5, 5, 5]


@pytest.mark.parametrize("position", ["none", "rope", "alibi", "relative", "shaw"])
def test_one_sliding_layer_is_full_attention_over_the_window_alone(position):
    """With one layer and a scheme that sees only offsets, query t's output is the full model's
    last output over tokens t - window + 1 .. t: the band hides exactly the rest."""
    W = 4
    full, sliding = pair("decoder_only", position, window=W, n_layers=1)
    ids = torch.randint(4, 37, (1, 11))
    with torch.no_grad():
        got = sliding(ids).logits  # (1, T, V)
        for t in range(ids.shape[1]):
            alone = full(ids[:, max(0, t - W + 1) : t + 1]).logits[:, -1]  # (1, V)
            torch.testing.assert_close(got[:, t], alone, atol=1e-5, rtol=1e-5)


def _decode(model, family, ids, cache, prompt, padding=None):
    """The logits of a prompt and then one token at a time through `cache`, (B, T, V)."""
    if family == "encoder_decoder":
        memory = model.encode(ids[:, :7])

        def run(tokens, mask):
            return model(
                decoder_input_ids=tokens,
                encoder_hidden_states=memory,
                decoder_attention_mask=mask,
                cache=cache,
                use_cache=cache is not None,
            ).logits
    else:

        def run(tokens, mask):
            return model(tokens, attention_mask=mask, cache=cache, use_cache=cache is not None).logits

    if cache is None:
        return run(ids, padding)
    outs = [run(ids[:, :prompt], None if padding is None else padding[:, :prompt])]
    for t in range(prompt, ids.shape[1]):
        outs.append(run(ids[:, t : t + 1], None if padding is None else padding[:, : t + 1]))
    return torch.cat(outs, dim=1)


@pytest.mark.parametrize(
    "family, position, cache",
    cases({"family": CAUSAL_FAMILIES, **model_axes("position"), "cache": ["growing", "static"]}),
)
def test_cached_decoding_past_the_window_is_the_whole_forward(family, position, cache):
    static = cache == "static"
    T, W = 13, 3
    model = zoo.build_model(
        tiny(
            family,
            position,
            n_layers=3,
            n_decoder_layers=3,
            attention="sliding",
            window=W,
            global_every=2,
            max_seq_len=40,
        )
        if family == "encoder_decoder"
        else tiny(family, position, n_layers=3, attention="sliding", window=W, global_every=2, max_seq_len=40)
    ).eval()
    ids = torch.randint(4, 37, (2, T))
    with torch.no_grad():
        reference = _decode(model, family, ids, None, 0)
        cache = model.new_cache(capacity=T if static else None)
        got = _decode(model, family, ids, cache, prompt=5)
    torch.testing.assert_close(got, reference, atol=1e-5, rtol=1e-4)
    for layer, window in zip(cache.layers, model.decoder.windows):
        c = layer.self_attn
        assert isinstance(c, SlidingStaticKVCache if static else SlidingKVCache) == (window is not None)
        size = (c._k if static else c.k).shape[2]  # positions held (a growing full cache may have room for more)
        # a sliding layer holds its window (static: a ring of W slots; growing: the W - 1 the
        # next query sees besides itself); a full layer every position
        assert size == (T if window is None else (W if static else W - 1)), (window, size)
        assert c.length == T


@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
@pytest.mark.parametrize("position", ["learned", "rope", "alibi"])
def test_cached_decoding_with_left_padding_is_the_whole_forward(position, static):
    T, W = 12, 3
    model = zoo.build_model(
        tiny("decoder_only", position, n_layers=2, attention="sliding", window=W, global_every=2, max_seq_len=40)
    ).eval()
    ids = torch.randint(4, 37, (2, T))
    padding = torch.ones(2, T, dtype=torch.long)
    padding[0, :4] = 0  # row 0 is left-padded by 4
    with torch.no_grad():
        reference = _decode(model, "decoder_only", ids, None, 0, padding)
        got = _decode(model, "decoder_only", ids, model.new_cache(capacity=T if static else None), 6, padding)
    real = padding.bool()
    torch.testing.assert_close(got[real], reference[real], atol=1e-5, rtol=1e-4)


def test_flex_attention_gives_sdpas_logits(monkeypatch):
    """The FlexAttention path (a block mask) against SDPA with the boolean band: causal and
    bidirectional stacks, grouped-query heads."""
    for family, W in (("decoder_only", 4), ("encoder_only", 5)):
        model = zoo.build_model(tiny(family, "rope", attention="sliding", window=W, n_kv_heads=1)).eval()
        ids = torch.randint(4, 37, (2, 16))
        with torch.no_grad():
            sdpa = model(ids).logits
            monkeypatch.setattr(flex_module, "FLEX_MIN_LEN", 1)
            stack = model.decoder if family == "decoder_only" else model.encoder
            assert is_block_mask(stack._sliding_mask(None, 16, None, ids.device)[0])
            flex = model(ids).logits
            monkeypatch.setattr(flex_module, "FLEX_MIN_LEN", 1024)
        torch.testing.assert_close(flex, sdpa, atol=1e-5, rtol=1e-5)


def test_flops_count_the_window():
    """Attention FLOPs per token are 4 · keys · H · Dh per layer: a sliding layer's keys are
    min(context, window), a full layer's the context."""
    n, S, W = 4, 32, 8
    full = zoo.summarize(zoo.build_model(tiny(n_layers=n, max_seq_len=S)))
    local = zoo.summarize(
        zoo.build_model(tiny(n_layers=n, max_seq_len=S, attention="sliding", window=W, global_every=2))
    )
    H, Dh = 2, 8
    assert full.flops_per_token - local.flops_per_token == (n // 2) * 4 * (S - W) * H * Dh
    wide = zoo.summarize(zoo.build_model(tiny(n_layers=n, max_seq_len=S, attention="sliding", window=S + 5)))
    assert wide.flops_per_token == full.flops_per_token


@pytest.mark.parametrize("family", CAUSAL_FAMILIES)
def test_kv_cache_bytes_are_what_a_static_cache_holds(family):
    """`kv_cache_bytes` against the buffers a static cache allocates for the same decoding."""
    W, prompt, new = 3, 5, 6
    cfg = tiny(family, "rope", n_layers=3, attention="sliding", window=W, global_every=2, max_seq_len=40)
    if family == "encoder_decoder":
        cfg["n_decoder_layers"] = 3
    model = zoo.build_model(cfg).eval()
    ids = torch.randint(4, 37, (1, prompt + new))
    with torch.no_grad():
        if family == "encoder_decoder":
            memory = model.encode(ids[:, :prompt])
            cache = model.new_cache(capacity=new)
            bos = torch.ones(1, 1, dtype=torch.long)
            model(decoder_input_ids=bos, encoder_hidden_states=memory, cache=cache, use_cache=True)
            for t in range(new - 1):
                model(decoder_input_ids=ids[:, t : t + 1], encoder_hidden_states=memory, cache=cache, use_cache=True)
        else:
            cache = model.new_cache(capacity=prompt + new - 1)
            model(ids[:, :prompt], cache=cache, use_cache=True)
            for t in range(prompt, prompt + new - 1):
                model(ids[:, t : t + 1], cache=cache, use_cache=True)
    held = sum(
        t.numel() * t.element_size()
        for layer in cache.layers
        for t in (layer.self_attn._k, layer.self_attn._v, *(layer.cross_kv or ()))
    )
    assert kv_cache_bytes(model.config, 1, prompt, new, 4) == held
    assert held < kv_cache_bytes(
        ModelConfig(**{**cfg, "attention": "full", "window": None, "global_every": None}), 1, prompt, new, 4
    )


@pytest.mark.parametrize(
    "bad, words",
    [
        (dict(window=3), "model.window=3 only applies to model.attention=sliding"),
        (dict(global_every=2), "model.global_every=2 only applies to model.attention=sliding"),
        (dict(attention="sliding"), "model.window must be a positive integer"),
        (dict(attention="sliding", window=0), "model.window must be a positive integer"),
        (dict(attention="sliding", window=3, global_every=0), "model.global_every must be a positive integer"),
        (dict(attention="sliding", window=4, family="encoder_only"), "must be odd for model.family=encoder_only"),
        (dict(attention="sliding", window=4, family="encoder_decoder"), "must be odd for model.family=encoder_decoder"),
        (dict(attention="local", window=3), "model.attention='local' is not allowed"),
    ],
)
def test_refused_on_one_line_before_weights(bad, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")) as caught:
        ModelConfig(**tiny(**bad))
    assert "\n" not in str(caught.value)


def test_export_refuses_a_sliding_window():
    """No exported family has a sliding window: a sliding model matches none (the same model
    with full attention exports)."""
    llama = dict(position="rope", norm_type="rmsnorm", activation="swiglu", bias=False)
    cfg = tiny(llama.pop("position") and "decoder_only", "rope", **llama)
    to_hf(zoo.build_model(cfg))
    with pytest.raises(UnsupportedConfig, match="matches no supported Hugging Face family"):
        to_hf(zoo.build_model({**cfg, "attention": "sliding", "window": 4}))


def test_in_band_is_symmetric_for_an_encoder():
    i, j = torch.arange(7)[:, None], torch.arange(7)[None, :]
    band = in_band(i, j, 5, causal=False)  # (7, 7)
    assert torch.equal(band, band.T)
    assert band.sum(-1)[3] == 5  # a middle query sees the window


@pytest.mark.parametrize("padded", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["unpadded", "padded"])
def test_a_sliding_static_step_is_one_graph_past_the_window(padded):
    """The ring's step writes slot n mod window from the device slot: traced once, never
    recompiled past the window (what CUDA graphs replay), and equal to the whole forward."""
    import torch._dynamo

    W, prompt, steps = 3, 5, 6
    model = zoo.build_model(
        tiny("decoder_only", "alibi", n_layers=2, attention="sliding", window=W, global_every=2, max_seq_len=40)
    ).eval()
    ids = torch.randint(4, 37, (2, prompt + steps))
    padding = torch.ones(2, prompt + steps, dtype=torch.long)
    padding[0, :2] = 0
    mask = padding if padded else None
    cache = model.new_cache(capacity=prompt + steps)
    with torch.no_grad():
        first = model(
            ids[:, :prompt], attention_mask=None if mask is None else mask[:, :prompt], cache=cache, use_cache=True
        ).logits
        torch._dynamo.reset()
        step = torch.compile(model, backend="eager", fullgraph=True)
        outs = [first]
        with torch._dynamo.config.patch(error_on_recompile=not padded):  # padding's mask grows a column a step
            for t in range(prompt, prompt + steps):
                outs.append(
                    step(
                        ids[:, t : t + 1],
                        attention_mask=None if mask is None else mask[:, : t + 1],
                        cache=cache,
                        use_cache=True,
                    ).logits
                )
        reference = model(ids, attention_mask=mask).logits
    real = padding.bool() if padded else torch.ones_like(padding, dtype=torch.bool)
    torch.testing.assert_close(torch.cat(outs, dim=1)[real], reference[real], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("peer", ["litgpt", "x-transformers", "hf"])
def test_the_bench_peers_refuse_a_sliding_window(peer):
    """A peer never stands in with full attention for a sliding zoo model."""
    from zoo.bench.peers import PeerUnavailable
    from zoo.bench.peers.litgpt import config_kwargs
    from zoo.bench.peers.xtransformers import decoder_kwargs
    from zoo.bench.workload import Workload

    model = ModelConfig(
        **tiny(
            "decoder_only", "rope", norm_type="rmsnorm", activation="swiglu", bias=False, attention="sliding", window=4
        )
    )
    work = Workload(model=model, batch=2, seq_len=16, device=torch.device("cpu"))
    if peer == "hf":
        from zoo.bench.peers.hf import HFSubject as subject

        with pytest.raises(PeerUnavailable, match="no Hugging Face equivalent"):
            subject(work, zoo_model=zoo.build_model(model))
        return
    with pytest.raises(PeerUnavailable, match=f"{peer} has no equivalent of model.attention=sliding"):
        (config_kwargs if peer == "litgpt" else decoder_kwargs)(work)


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
@pytest.mark.parametrize("family", CAUSAL_FAMILIES)
def test_generation_past_the_window_is_the_same_with_every_cache(family, strategy):
    """Greedy and beam search (whose caches are reordered) give the same tokens without a cache,
    with the growing cache and with the static ring, on peaked weights (init_std 0.5)."""
    from tests.conftest import sharp
    from zoo.config.schema.generation import GenerationConfig
    from zoo.models.generate import generate

    cfg = sharp(family, "rope", n_layers=3, attention="sliding", window=3, global_every=2, max_seq_len=40)
    if family == "encoder_decoder":
        cfg["n_decoder_layers"] = 3
    model = zoo.build_model(cfg).eval()
    ids = torch.randint(4, 37, (2, 6))
    beams = {"num_beams": 2} if strategy == "beam" else {}
    out = [
        generate(
            model,
            ids,
            bos_id=2,
            eos_id=None,
            config=GenerationConfig(strategy=strategy, max_new_tokens=9, **beams, **cache),
        )
        for cache in ({"use_cache": False}, {}, {"static_cache": True})
    ]
    assert torch.equal(out[0], out[1]) and torch.equal(out[0], out[2])


@pytest.mark.slow  # compiles FlexAttention and the model
def test_a_stack_set_to_the_flex_kernel_gives_sdpas_logits_compiled_at_any_length_past_the_window():
    """`sliding_kernel = "flex"` takes the block mask below FLEX_MIN_LEN with SDPA's logits;
    "sdpa" keeps the boolean band; on the CPU a forward that needs a backward (FlexAttention has
    none there) and a compiled model keep SDPA: inductor's CPU lowering of FlexAttention inside
    the whole model's graph gave logits 0.15 off (torch 2.13), and the compiled model here is
    one graph with SDPA's logits."""
    model = zoo.build_model(tiny("decoder_only", "rope", attention="sliding", window=8, max_seq_len=64)).eval()
    ids = torch.randint(4, 37, (2, 48))
    with torch.no_grad():
        sdpa = model(ids).logits
        model.decoder.sliding_kernel = "sdpa"
        assert not is_block_mask(model.decoder._sliding_mask(None, 48, None, ids.device)[0])
        model.decoder.sliding_kernel = "flex"
        assert is_block_mask(model.decoder._sliding_mask(None, 48, None, ids.device)[0])
        torch.testing.assert_close(model(ids).logits, sdpa, atol=1e-5, rtol=1e-5)
        compiled = torch.compile(model, fullgraph=True)
        torch.testing.assert_close(compiled(ids).logits, sdpa, atol=1e-5, rtol=1e-5)
    assert not is_block_mask(model.decoder._sliding_mask(None, 48, None, ids.device)[0])  # grad on, CPU
    with pytest.raises(ValueError, match="sliding kernel"):
        flex_module.use_flex(
            T=48, window=8, device=ids.device, position=PositionKind.rope, padded=False, dropout=0.0, kernel="band"
        )
