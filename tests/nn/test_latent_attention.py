"""Multi-head latent attention (model.kv=latent, `zoo.nn.latent_attention`): its expanded form
against transformers' `DeepseekV3Attention` with random weights copied through the converter's
rows (`zoo.interop.hf.mla`, interleaved RoPE rows and all), its absorbed form through every cache
(growing, static, sliding, left-padded) against the whole forward, a cache that holds the latent
and the shared key only, and the KV-cache bytes `zoo.models.limits` counts."""

from __future__ import annotations

import pytest
import torch

import zoo
import zoo.nn.cache as cache_module
from tests.conftest import CAUSAL_FAMILIES, sharp, tiny
from zoo.config import ModelConfig
from zoo.config.schema.generation import GenerationConfig
from zoo.interop.hf import UnsupportedConfig
from zoo.interop.hf.mla import ATTENTION_ROWS, attention_keys, hf_attention_keys
from zoo.models.generate import generate
from zoo.models.limits import kv_cache_bytes
from zoo.nn.latent_attention import LatentAttention
from zoo.nn.position.rope import RotaryPositions

LATENT = dict(kv="latent", kv_lora_rank=12, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6)


def _deepseek_attention(cfg: ModelConfig):
    """transformers' DeepseekV3Attention of `cfg`'s widths, every weight (norms too) random."""
    transformers = pytest.importorskip("transformers", reason="the parity test runs transformers' module")
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as deepseek

    config = transformers.DeepseekV3Config(
        hidden_size=cfg.d_model,
        num_attention_heads=cfg.n_heads,
        rms_norm_eps=cfg.norm_eps,
        max_position_embeddings=cfg.max_seq_len,
        rope_parameters={"rope_type": "default", "rope_theta": cfg.position.theta},
        **hf_attention_keys(cfg),
    )
    config._attn_implementation = "eager"
    layer = deepseek.DeepseekV3Attention(config, layer_idx=0).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0.0, 0.3)
    return config, layer, deepseek.DeepseekV3RotaryEmbedding(config)


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("q_lora_rank", [None, 10], ids=["q_proj", "q_lora"])
def test_the_expanded_form_is_transformers_deepseek_v3_attention(q_lora_rank, bias):
    """Weights copied through ATTENTION_ROWS (de-interleaving DeepSeek's RoPE rows), float32:
    the outputs of a causal forward agree within 1e-4, and every row exports back unchanged."""
    torch.manual_seed(0)
    cfg = ModelConfig(
        **tiny(
            "decoder_only",
            "rope",
            d_model=32,
            n_heads=4,
            norm_type="rmsnorm",
            norm_eps=1e-6,
            bias=bias,
            q_lora_rank=q_lora_rank,
            **LATENT,
        )
    )
    config, theirs, rotary = _deepseek_attention(cfg)
    assert config.rope_interleave
    assert ModelConfig(**tiny("decoder_only", "rope", d_model=32, n_heads=4, **attention_keys(config))).kv == "latent"
    ours = LatentAttention(cfg).eval()
    hf_state, state = theirs.state_dict(), {}
    for r in ATTENTION_ROWS:
        if r.when is None or r.when(cfg, 0):
            name, hf_name = r.zoo.removeprefix("self_attn."), r.hf[0].removeprefix("self_attn.")
            state[name] = r.transform.to_zoo(hf_state[hf_name], cfg)
            assert torch.equal(r.transform.to_hf(state[name], cfg), hf_state[hf_name]), name
    ours.load_state_dict(state, strict=True)  # the rows name every weight
    B, T = 2, 7
    x = torch.randn(B, T, cfg.d_model)
    positions = torch.arange(T)[None].expand(B, T)
    causal = torch.full((T, T), float("-inf")).triu(1)[None, None]  # (1, 1, T, T) additive
    with torch.no_grad():
        expected = theirs(x, position_embeddings=rotary(x, positions), attention_mask=causal)[0]
        got = ours(x, positions=positions, position=RotaryPositions(head_dim=cfg.head_dim), mask=None, causal=True)
    assert (got - expected).abs().max().item() <= 1e-4


def test_rope_parts_laid_out_as_rotate_half_are_refused_on_import():
    config = pytest.importorskip("transformers").DeepseekV3Config(rope_interleave=False)
    with pytest.raises(UnsupportedConfig, match="rope_interleave=False"):
        attention_keys(config)


def _decode(model, family, ids, cache, prompt, padding=None, source=None):
    """Logits (B, T, V) of `ids`: one forward without a cache (cache None), or the first `prompt`
    tokens then one token a step through `cache`."""
    kwargs = {}
    if family == "encoder_decoder":
        kwargs["encoder_hidden_states"] = model.encode(source)

    def run(piece, mask, c):
        if family == "encoder_decoder":
            return model(decoder_input_ids=piece, cache=c, use_cache=c is not None, **kwargs)
        return model(piece, attention_mask=mask, cache=c, use_cache=c is not None)

    if cache is None:
        return run(ids, padding, None).logits
    pieces = []
    for start, end in [(0, prompt)] + [(t, t + 1) for t in range(prompt, ids.shape[1])]:
        mask = padding[:, :end] if padding is not None else None
        pieces.append(run(ids[:, start:end], mask, cache).logits)
    return torch.cat(pieces, dim=1)


@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
@pytest.mark.parametrize("position", ["rope", "alibi", "relative", "learned", "none"])
@pytest.mark.parametrize("family", CAUSAL_FAMILIES)
def test_cached_decoding_in_the_absorbed_form_is_the_whole_forward(family, position, static):
    """Peaked weights (a mixed-up row or position changes an argmax); the cache holds the
    latent (B, 1, S, r) and the rotated shared key (B, 1, S, d_r) per layer, nothing per head."""
    torch.manual_seed(0)
    model = zoo.build_model(sharp(family, position, q_lora_rank=10, **LATENT)).eval()
    T = 9
    ids, source = torch.randint(4, 37, (2, T)), torch.randint(4, 37, (2, 6))
    with torch.no_grad():
        whole = _decode(model, family, ids, None, 0, source=source)
        cache = model.new_cache(capacity=T if static else None)
        stepped = _decode(model, family, ids, cache, 4, source=source)
    torch.testing.assert_close(stepped, whole, atol=1e-5, rtol=1e-4)
    for layer in cache.layers:
        kept = layer.self_attn
        assert kept.length == T
        assert tuple(kept.k.shape[:2]) == (2, 1) and kept.k.shape[-1] == 12  # the latent
        assert tuple(kept.v.shape[:2]) == (2, 1) and kept.v.shape[-1] == 4  # the shared key


@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
def test_cached_decoding_past_a_sliding_window_and_with_left_padding_is_the_whole_forward(static):
    torch.manual_seed(0)
    sliding = dict(attention="sliding", window=3, global_every=2, n_layers=3, max_seq_len=40)
    model = zoo.build_model(sharp("decoder_only", "rope", **sliding, **LATENT)).eval()
    T = 12
    ids = torch.randint(4, 37, (2, T))
    padding = torch.ones(2, T, dtype=torch.long)
    padding[0, :4] = 0  # row 0 is left-padded by 4
    with torch.no_grad():
        whole = _decode(model, "decoder_only", ids, None, 0, padding)
        stepped = _decode(model, "decoder_only", ids, model.new_cache(capacity=T if static else None), 6, padding)
    real = padding.bool()
    torch.testing.assert_close(stepped[real], whole[real], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("family", CAUSAL_FAMILIES)
def test_kv_cache_bytes_are_the_latent_and_the_shared_key_a_static_cache_allocates(family, monkeypatch):
    model = zoo.build_model(tiny(family, "rope", max_seq_len=64, n_heads=4, **LATENT)).eval()
    made = []
    original = cache_module.Cache.empty.__func__

    def recording(cls, n_layers, capacity=None, windows=None, recurrent=None):
        made.append(original(cls, n_layers, capacity, windows, recurrent))
        return made[-1]

    monkeypatch.setattr(cache_module.Cache, "empty", classmethod(recording))
    B, T, new = 3, 7, 5
    generate(
        model,
        torch.randint(6, 30, (B, T)),
        config=GenerationConfig(max_new_tokens=new, static_cache=True),
        bos_id=2,
        eos_id=None,
    )
    (cache,) = made
    allocated = sum(layer.self_attn.k.nbytes + layer.self_attn.v.nbytes for layer in cache.layers)
    allocated += sum(sum(t.nbytes for t in layer.cross_kv) for layer in cache.layers if layer.cross_kv is not None)
    cfg = model.config
    assert allocated == kv_cache_bytes(cfg, B, T, new, itemsize=4) > 0
    if family == "decoder_only":  # (r + d_r) per position and layer, not 2·H·Dh
        assert allocated == cfg.n_layers * B * (T + new - 1) * (12 + 4) * 4


@pytest.mark.slow
def test_a_static_latent_decoding_step_is_one_graph_at_every_step():
    """The absorbed step over a static cache of latents: traced once, never recompiled (what a
    CUDA graph replays), and equal to the whole forward."""
    torch.manual_seed(0)
    model = zoo.build_model(sharp("decoder_only", "rope", max_seq_len=40, q_lora_rank=10, **LATENT)).eval()
    prompt, steps = torch.randint(4, 37, (2, 5)), 6
    cache = model.new_cache(capacity=5 + steps)
    with torch.no_grad():
        model(prompt, cache=cache, use_cache=True)  # the prompt, eagerly (as zoo.models.generate runs it)
        torch._dynamo.reset()
        step = torch.compile(model, backend="eager", fullgraph=True)
        with torch._dynamo.config.patch(error_on_recompile=True):
            tokens = torch.randint(4, 37, (2, steps))
            compiled = [step(tokens[:, i : i + 1], cache=cache, use_cache=True).logits for i in range(steps)]
        reference = model(torch.cat([prompt, tokens], dim=1)).logits
    torch.testing.assert_close(torch.cat(compiled, dim=1), reference[:, 5:], atol=1e-5, rtol=1e-4)


def test_soft_capped_scores_decode_as_the_whole_forward_and_packed_documents_attend_apart():
    torch.manual_seed(0)
    ids = torch.randint(4, 37, (2, 9))
    capped = zoo.build_model(sharp("decoder_only", "rope", attn_softcap=2.0, **LATENT)).eval()
    model = zoo.build_model(sharp("decoder_only", "rope", **LATENT)).eval()
    documents = torch.tensor([[0] * 4 + [1] * 5] * 2)  # two packed documents, positions restarting
    positions = torch.tensor([list(range(4)) + list(range(5))] * 2)
    with torch.no_grad():
        stepped = _decode(capped, "decoder_only", ids, capped.new_cache(), 4)
        whole = _decode(capped, "decoder_only", ids, None, 0)
        packed = model(ids, position_ids=positions, document_ids=documents).logits
        apart = torch.cat([model(ids[:, :4]).logits, model(ids[:, 4:]).logits], dim=1)
    torch.testing.assert_close(stepped, whole, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(packed, apart, atol=1e-5, rtol=1e-4)
    for layer in capped.decoder.layers:  # the cap acted: without it the logits move
        layer.self_attn.softcap = None
    with torch.no_grad():
        assert (capped(ids).logits - whole).abs().max() > 1e-2
