"""Sliding-window layers on a GPU with `sliding_kernel = "flex"` (`pytest -m gpu`): eager and
compiled, training takes FlexAttention with the band's block mask and gives the logits and
gradients of SDPA with the boolean band, in float32, for the schemes FlexAttention can express
(no score bias, no weights), causal and bidirectional, with grouped-query heads."""

from __future__ import annotations

import pytest
import torch

import zoo
from tests.conftest import sharp
from tests.gpu.conftest import DEVICE, FP32_TOL
from zoo.nn.flex import is_block_mask

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.mark.parametrize("family", ["decoder_only", "encoder_only"])
@pytest.mark.parametrize("position", ["rope", "none", "learned"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_flex_sliding_layers_train_with_the_boolean_bands_logits_and_gradients(family, position, compiled):
    torch.manual_seed(0)
    # heads of 16 (d_model 32, 2 heads): compiled FlexAttention refuses narrower ones
    cfg = sharp(family, position, attention="sliding", window=16, global_every=2, n_layers=4)
    model = zoo.build_model({**cfg, "n_kv_heads": 1, "d_model": 32, "max_seq_len": 160}).to(DEVICE)
    stack = model.decoder if family == "decoder_only" else model.encoder
    ids = torch.randint(4, 37, (2, 160), device=DEVICE)
    out = {}
    for kernel in ("sdpa", "flex"):
        stack.sliding_kernel = kernel
        assert is_block_mask(stack._sliding_mask(None, 160, None, ids.device)[0]) == (kernel == "flex")
        run = torch.compile(model) if compiled else model
        model.zero_grad()
        logits = run(ids).logits  # (B, T, V)
        logits.square().mean().backward()
        out[kernel] = (logits.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None])
        torch._dynamo.reset()
    torch.testing.assert_close(out["flex"][0], out["sdpa"][0], rtol=FP32_TOL, atol=FP32_TOL)
    for flex, sdpa in zip(out["flex"][1], out["sdpa"][1], strict=True):
        torch.testing.assert_close(flex, sdpa, rtol=FP32_TOL, atol=FP32_TOL)
