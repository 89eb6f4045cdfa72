"""Gated attention against transformers' `Qwen3NextAttention` (the gate fused into q_proj, per
head dimension): a small random layer (D 32, 4 heads over 2 key/value heads, Dh 8, RoPE over the
whole head), its weights moved into zoo's attention with `model.attn_gate=elementwise
model.qk_norm=head` by `zoo.interop.hf.query_gate`: the same output (float32, <= 1e-5) and the
fused projection given back as it was."""

from __future__ import annotations

import torch
import transformers  # a test dependency: missing, these tests fail rather than skip
from transformers.models.qwen3_next import modeling_qwen3_next as qwen3_next

import zoo
from zoo.config import ModelConfig
from zoo.interop.hf.query_gate import join_query_gate, split_query_gate
from zoo.nn.position import build_position

D, H, HKV, DH, T = 32, 4, 2, 8, 7


def test_zoos_elementwise_gate_is_qwen3_nexts_gated_attention():
    config = transformers.Qwen3NextConfig(
        hidden_size=D,
        num_attention_heads=H,
        num_key_value_heads=HKV,
        head_dim=DH,
        partial_rotary_factor=1.0,
        rms_norm_eps=1e-6,
        vocab_size=50,
        num_hidden_layers=1,
        attention_bias=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    theirs = qwen3_next.Qwen3NextAttention(config, 0).eval()
    with torch.no_grad():
        for name, tensor in theirs.named_parameters():
            tensor.normal_(0.0, 0.1 if "norm" in name else 0.3)
    cfg = ModelConfig(
        d_model=D,
        n_heads=H,
        n_kv_heads=HKV,
        head_dim=DH,
        position={"kind": "rope"},
        norm_type="rmsnorm",
        qk_norm="head",
        attn_gate="elementwise",
        norm_eps=1e-6,
        n_layers=1,
        vocab_size=50,
    )
    ours = zoo.build_model(cfg).decoder.layers[0].self_attn.eval()
    with torch.no_grad():
        for suffix in ("weight", "bias"):
            q, gate = split_query_gate(getattr(theirs.q_proj, suffix), H, DH)
            kv = [getattr(theirs.k_proj, suffix), getattr(theirs.v_proj, suffix)]
            getattr(ours.qkv_proj, suffix).copy_(torch.cat([q, *kv]))
            getattr(ours.gate.proj, suffix).copy_(gate)
            getattr(ours.o_proj, suffix).copy_(getattr(theirs.o_proj, suffix))
            assert torch.equal(join_query_gate(q, gate, H, DH), getattr(theirs.q_proj, suffix))
        ours.q_norm.weight.copy_(theirs.q_norm.weight + 1.0)  # Qwen3-Next's norm: x/rms(x)·(1 + w)
        ours.k_norm.weight.copy_(theirs.k_norm.weight + 1.0)
    x = torch.randn(2, T, D)
    positions = torch.arange(T).expand(2, T)
    causal = torch.full((T, T), float("-inf")).triu(1)[None, None]  # (1, 1, T, T) additive
    with torch.no_grad():
        expected, _ = theirs(x, qwen3_next.Qwen3NextRotaryEmbedding(config)(x, positions), causal)
        got = ours(x, positions=positions, position=build_position(cfg, causal=True), mask=None, causal=True)
        ungated = ours.gate
        ours.gate = None  # the same layer without its gate computes something else
        assert (
            ours(x, positions=positions, position=build_position(cfg, causal=True), mask=None, causal=True) - expected
        ).abs().max() > 1e-2
        ours.gate = ungated
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
