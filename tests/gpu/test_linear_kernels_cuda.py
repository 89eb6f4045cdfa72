"""Gated DeltaNet's flash-linear-attention kernel (zoo.nn.linear_kernels) against zoo's PyTorch
chunked form on a CUDA GPU: the rule itself (outputs, final states and gradients) in float32 and
bf16, with grouped value heads, a state before the forward and packed documents, and a whole
hybrid model's loss and gradients with and without the kernel.

Run with `pytest -m gpu`; skipped without CUDA or without flash-linear-attention installed."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import zoo
from tests.conftest import tiny
from tests.gpu.conftest import DEVICE, relative_diff
from zoo.nn.gated_deltanet import chunked_rule
from zoo.nn.linear_kernels import fla_available, fla_gated_delta, gated_delta_kernel, torch_only

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(
        torch.cuda.is_available() and not fla_available(),
        reason="flash-linear-attention is not installed (pip install '.[fla]')",
    ),
]

# float32: fla's Triton dots run in TF32 on Hopper (about 3e-4 per product, a few products deep);
# bf16 operands: between 1e-3 and 1e-2
TOL = {torch.float32: 5e-3, torch.bfloat16: 3e-2}


def _inputs(B, T, Hk, Hv, dk, dv, dtype, *, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, Hk, dk, generator=g)
    k = torch.randn(B, T, Hk, dk, generator=g)
    v = torch.randn(B, T, Hv, dv, generator=g)
    a = torch.randn(B, T, Hv, generator=g)
    gate = -torch.rand(Hv, generator=g).mul(4).exp() * F.softplus(a)  # (B, T, Hv) the layer's log decay
    beta = torch.rand(B, T, Hv, generator=g)
    tensors = [q, k, v, gate, beta]
    return [t.to(DEVICE, dtype if i < 3 else torch.float32).requires_grad_() for i, t in enumerate(tensors)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", ["plain", "grouped_values", "initial_state", "documents", "ragged"])
def test_the_kernel_computes_the_chunked_rule(dtype, case):
    B, T, Hk, Hv, dk, dv = 3, 200, 2, 2, 32, 48
    if case == "grouped_values":
        Hv = 4
    if case == "ragged":
        T = 77  # not a multiple of the chunk
    q, k, v, g, beta = _inputs(B, T, Hk, Hv, dk, dv, dtype, seed=hash(case) % 1000)
    initial = torch.randn(B, Hv, dk, dv, device=DEVICE) if case == "initial_state" else None
    resets = None
    if case == "documents":
        resets = torch.zeros(B, T, dtype=torch.bool, device=DEVICE)
        resets[0, [30, 100, 101]] = True
        resets[2, 150] = True
    kernel = gated_delta_kernel(q, initial, resets)
    assert kernel is not None, "on CUDA with fla installed the kernel must be chosen"
    ref_inputs = [t.detach().double().float().clone().requires_grad_() for t in (q, k, v, g, beta)]
    out, final = fla_gated_delta(kernel, q, k, v, g, beta, initial, resets)
    ref, ref_final = chunked_rule(*ref_inputs, initial, resets=resets)  # float32 reference
    assert out.dtype == dtype and out.shape == (B, T, Hv, dv)
    assert torch.isfinite(out).all() and torch.isfinite(final).all()
    tol = TOL[dtype]
    assert relative_diff(out.float(), ref) < tol
    assert relative_diff(final, ref_final) < tol
    weight = torch.randn_like(ref)
    (out.float() * weight).sum().backward()
    (ref * weight).sum().backward()
    for name, got, want in zip("qkvgb", (q, k, v, g, beta), ref_inputs):
        assert got.grad is not None and torch.isfinite(got.grad).all(), name
        assert relative_diff(got.grad.float(), want.grad) < 2 * tol, name


def test_the_kernel_is_not_chosen_where_it_does_not_apply():
    x = torch.zeros(1, 4, 8, device=DEVICE)
    assert gated_delta_kernel(x.cpu(), None, None) is None  # not on CUDA
    with torch_only():
        assert gated_delta_kernel(x, None, None) is None
    state, resets = torch.zeros(1, 2, 8, 8, device=DEVICE), torch.zeros(1, 4, dtype=torch.bool, device=DEVICE)
    assert gated_delta_kernel(x, state, resets) is None  # a state and packed documents: PyTorch
    assert gated_delta_kernel(x, None, resets) is not None


def test_a_hybrid_model_trains_the_same_with_the_kernel():
    torch.manual_seed(0)
    cfg = tiny("decoder_only", layer_pattern=["gated_deltanet", "full"], d_model=64, max_seq_len=256)
    model = zoo.build_model(cfg).to(DEVICE)  # Triton's dots need key heads of 16 or more: dk = 32
    ids = torch.randint(0, cfg["vocab_size"], (2, 150), device=DEVICE)

    def loss_and_grads():
        model.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids[:, :-1]).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        return loss.item(), [p.grad.float().clone() for p in model.parameters() if p.grad is not None]

    fast, fast_grads = loss_and_grads()
    with torch_only():
        slow, slow_grads = loss_and_grads()
    assert abs(fast - slow) < 1e-2 * abs(slow)
    assert len(fast_grads) == len(slow_grads)
    for got, want in zip(fast_grads, slow_grads):
        assert relative_diff(got, want) < 5e-2
