"""The 2025–26 options (recurrent mixers and layer patterns, latent attention, sinks, gated
attention, value residual and embeddings, hyper-connections, the aux-loss-free mixture) on a CUDA
GPU, one tiny decoder each: a bf16 autocast training step near float32's on the same device
(loss, and gradients pointing the same way), and cached greedy decoding giving the uncached
tokens in float32. The CPU suite holds each option's parity and decoding in float32; this file
holds what only a GPU shows: its kernels, bf16 under autocast, and the caches on the device.

Run with `pytest -m gpu`; elsewhere every test is skipped."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import zoo
from tests.conftest import tiny
from tests.gpu.conftest import DEVICE
from zoo.models.generate import generate

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

# d_model 64 with 2 heads (Dh 32): Triton's dots, where a kernel is installed, need widths of 16 or more
BASE = dict(d_model=64, n_heads=2, n_layers=4, max_seq_len=64, norm_type="rmsnorm", bias=False)
OPTIONS = {
    "gated_deltanet 1:1": dict(layer_pattern=["gated_deltanet", "full"]),
    "gated_deltanet 3:1, grouped values": dict(
        layer_pattern=["gated_deltanet", "gated_deltanet", "gated_deltanet", "full"], linear_value_heads=4
    ),
    "mamba2 1:1": dict(layer_pattern=["mamba2", "full"], ssm_state=16, ssm_head_dim=16, ssm_chunk=16),
    "gated_deltanet, sliding, full": dict(
        layer_pattern=["gated_deltanet", "sliding", "gated_deltanet", "full"], window=8
    ),
    "latent attention": dict(kv="latent", kv_lora_rank=32, qk_rope_head_dim=16),
    "learned sinks": dict(attn_sink="learned"),
    "off-by-one sinks": dict(attn_sink="off_by_one"),
    "elementwise gate": dict(attn_gate="elementwise"),
    "headwise gate": dict(attn_gate="headwise"),
    "value residual": dict(value_residual="learned"),
    "value embeddings": dict(value_embeds=2),
    "hyper-connections": dict(hyper_connections="dynamic"),
    "mixture, aux-loss-free": dict(ffn="moe", moe_experts=4, moe_top_k=2, moe_balance="bias"),
}
CASES = pytest.mark.parametrize("option", list(OPTIONS))


def build(option: str):
    torch.manual_seed(0)
    return zoo.build_model(tiny("decoder_only", "rope", **{**BASE, **OPTIONS[option]})).to(DEVICE)


def loss_of(model, ids) -> torch.Tensor:
    logits = model(ids[:, :-1]).logits  # (B, T, V)
    return F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())


@CASES
def test_bf16_training_step_is_near_float32(option):
    model = build(option).train()
    ids = torch.randint(0, 37, (3, 40), device=DEVICE)
    ref = loss_of(model, ids)
    ref.backward()
    ref_grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    model.zero_grad(set_to_none=True)
    with torch.autocast(DEVICE.type, dtype=torch.bfloat16):
        loss = loss_of(model, ids)
    assert torch.isfinite(loss)
    torch.testing.assert_close(loss, ref, atol=3e-2, rtol=1e-2)
    loss.backward()
    for name, p in model.named_parameters():
        if p.grad is not None:
            assert torch.isfinite(p.grad).all(), f"{name} has a non-finite gradient"
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    assert grads.shape == ref_grads.shape, "bf16 reached other parameters than float32"
    cosine = F.cosine_similarity(grads, ref_grads, dim=0)
    assert cosine > 0.99, f"bf16 gradients point elsewhere than float32's (cosine {cosine:.4f})"


@CASES
@torch.no_grad()
def test_cached_greedy_decoding_gives_the_uncached_tokens(option):
    model = build(option).eval()
    for p in model.parameters():  # sharp weights: logits far from ties, so a token differs only by a fault
        p.mul_(4.0)
    ids = torch.randint(0, 37, (2, 7), device=DEVICE)
    outs = [generate(model, ids, max_new_tokens=12, use_cache=cache) for cache in (True, False)]  # (B, N)
    assert outs[0].shape == (2, 12)
    assert torch.equal(outs[0], outs[1]), f"cached {outs[0].tolist()} vs uncached {outs[1].tolist()}"
