"""Document masking on a GPU (`pytest -m gpu`): compiled, attention takes FlexAttention with the
documents' block mask (schemes without a score bias) and gives the logits and gradients of the
eager SDPA path with the boolean mask, under every position scheme, in float32."""

from __future__ import annotations

import pytest
import torch

import zoo
from tests.conftest import POSITIONS, sharp
from tests.gpu.conftest import DEVICE, FP32_TOL
from zoo.data.collate.causal import collate_causal

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

EOS = 3


@pytest.mark.parametrize("position", POSITIONS)
def test_compiled_flex_attention_gives_the_eager_sdpa_logits_and_gradients(position):
    g = torch.Generator().manual_seed(0)
    windows = torch.randint(8, 37, (3, 33), generator=g)  # (B, T + 1)
    windows[torch.rand(3, 33, generator=g) < 0.15] = EOS
    batch = {k: v.to(DEVICE) for k, v in collate_causal(list(windows), eos_id=EOS).items()}
    torch.manual_seed(0)
    # heads of 16 (d_model 32, 2 heads): compiled FlexAttention refuses narrower ones, which take SDPA
    model = zoo.build_model(sharp(position=position, n_kv_heads=1, d_model=32)).to(DEVICE)
    out = {}
    for kernel, run in (("sdpa", model), ("flex", torch.compile(model))):
        model.decoder.document_kernel = kernel
        model.zero_grad()
        logits = run(batch["input_ids"], document_ids=batch["document_ids"]).logits  # (B, T, V)
        logits.square().mean().backward()
        out[kernel] = (logits.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None])
    torch.testing.assert_close(out["flex"][0], out["sdpa"][0], rtol=FP32_TOL, atol=FP32_TOL)
    for flex, sdpa in zip(out["flex"][1], out["sdpa"][1], strict=True):
        torch.testing.assert_close(flex, sdpa, rtol=FP32_TOL, atol=FP32_TOL)
