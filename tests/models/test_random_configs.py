"""Random valid model configs (hypothesis): every one builds, runs forward and backward with
finite values, is causal where causal, and decodes the same with and without the KV cache."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zoo
from tests.conftest import ACTIVATIONS, FAMILIES, NORM_TYPES, NORMS, POSITIONS


@st.composite
def model_configs(draw) -> dict:
    head_dim = draw(st.sampled_from([2, 4, 6, 8]))
    n_kv_heads = draw(st.sampled_from([1, 2, 3]))
    n_heads = n_kv_heads * draw(st.sampled_from([1, 2]))
    family = draw(st.sampled_from(FAMILIES))
    position = draw(st.sampled_from(POSITIONS))
    cfg = dict(
        family=family,
        position={"kind": position},
        norm=draw(st.sampled_from(NORMS)),
        norm_type=draw(st.sampled_from(NORM_TYPES)),
        activation=draw(st.sampled_from(ACTIVATIONS)),
        d_model=draw(st.sampled_from([8, 12, 16, 24])),
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        head_dim=head_dim,
        n_layers=draw(st.integers(1, 3)),
        d_ff=draw(st.sampled_from([8, 16, 32])),
        vocab_size=draw(st.integers(8, 40)),
        max_seq_len=draw(st.integers(12, 24)),
        dropout=draw(st.sampled_from([0.0, 0.1])),
        tie_embeddings=draw(st.booleans()),
        bias=draw(st.booleans()),
        scale_embeddings=draw(st.booleans()),
        embed_norm=draw(st.booleans()),
        token_types=draw(st.sampled_from([0, 0, 2])),
        attention_scale=draw(st.sampled_from([None, None, 1.0])),
        head_transform=draw(st.booleans()),
        scale_output=draw(st.booleans()),
        output_bias=draw(st.booleans()),
        parametrization=draw(st.sampled_from(["standard", "standard", "mup"])),
    )
    if cfg["parametrization"] == "mup":
        cfg["mup_base_d_model"] = draw(st.sampled_from([4, 8, 32]))  # m from 1/4 to 6
    if family == "encoder_decoder":
        cfg["n_decoder_layers"] = draw(st.integers(1, 3))
    if position == "relative":
        cfg["position"].update(num_buckets=draw(st.sampled_from([4, 8, 16])), max_distance=draw(st.integers(20, 40)))
    if position == "shaw":
        cfg["position"]["clip"] = draw(st.integers(1, 6))
    if position == "learned":
        cfg["position"]["offset"] = draw(st.sampled_from([0, 2]))
    if position == "rope":
        cfg["position"]["theta"] = draw(st.sampled_from([100.0, 10000.0]))
    return cfg


# examples per run; more on demand: ZOO_FUZZ_EXAMPLES=5000 pytest tests/models/test_random_configs.py
FUZZ_EXAMPLES = int(os.environ.get("ZOO_FUZZ_EXAMPLES", 200))


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=model_configs(), data=st.data())
@pytest.mark.slow
def test_random_valid_configs_work(cfg, data):
    model = zoo.build_model(cfg)
    V, L = cfg["vocab_size"], cfg["max_seq_len"]
    T = data.draw(st.integers(2, L), label="T")
    B = data.draw(st.integers(1, 3), label="B")
    ids = torch.randint(0, V, (B, T))
    enc_dec = cfg["family"] == "encoder_decoder"
    kwargs = {"decoder_input_ids": ids} if enc_dec else {}

    model.train()
    out = model(ids, **kwargs)
    assert out.logits.shape == (B, T, V) and torch.isfinite(out.logits).all()
    out.logits.float().logsumexp(-1).mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())

    model.eval()
    if cfg["family"] == "encoder_only":
        return
    with torch.no_grad():
        full = model(ids, **kwargs).logits
        changed = ids.clone()
        changed[:, -1] = (changed[:, -1] + 1) % V
        if enc_dec:
            again = model(ids, decoder_input_ids=changed).logits
        else:
            again = model(changed).logits
        assert torch.allclose(full[:, :-1], again[:, :-1], atol=1e-5)  # causal
        memory = model.encode(ids) if enc_dec else None
        cache, pieces = None, []
        for t in range(T):
            step = ids[:, t : t + 1]
            o = (
                model(decoder_input_ids=step, encoder_hidden_states=memory, cache=cache, use_cache=True)
                if enc_dec
                else model(step, cache=cache, use_cache=True)
            )
            cache = o.cache
            pieces.append(o.logits)
        assert torch.allclose(torch.cat(pieces, 1), full, atol=1e-4)
