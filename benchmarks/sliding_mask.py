"""Sliding-window attention on one device: SDPA with a boolean band mask against FlexAttention
with the band as a block mask (compiled), and the full causal SDPA for scale: one attention
call's forward, and forward + backward where the device has one (FlexAttention has no backward
on CPU in torch 2.13). Prints milliseconds per call (median of `rounds`). On a CUDA device (used
when there is one) the inputs are bfloat16 and every time is taken after a synchronize.

    python benchmarks/sliding_mask.py [T] [window] [rounds]
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from zoo.nn.mask import attention_mask, band_mask_mod


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _time(fn, rounds: int) -> float:
    fn()  # warm-up (and compilation)
    _sync()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main(T: int = 1024, window: int = 128, rounds: int = 5) -> None:
    torch.manual_seed(0)
    B, H, Dh = (4, 16, 64) if torch.cuda.is_available() else (1, 4, 64)  # a GPU: enough heads to fill it
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    q, k, v = (
        torch.randn(B, H, T, Dh, device=device, dtype=dtype, requires_grad=True) for _ in range(3)
    )  # (B, H, T, Dh)
    mask = attention_mask(q_len=T, k_len=T, causal=True, key_padding=None, device=q.device, window=window)
    block = create_block_mask(band_mask_mod(window, causal=True), None, None, T, T, device=device)
    flex = torch.compile(flex_attention)

    on_cpu = q.device.type == "cpu"
    calls = {
        "sdpa full causal": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "sdpa band mask": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        "flex band block mask (compiled)": lambda q, k, v: flex(q, k, v, block_mask=block),
    }
    frozen = [t.detach() for t in (q, k, v)]  # (B, H, T, Dh) each, no autograd
    for name, attend in calls.items():
        with torch.no_grad():
            forward = _time(lambda attend=attend: attend(*frozen), rounds)
        both = (
            None
            if (on_cpu and name.startswith("flex"))
            else _time(lambda attend=attend: attend(q, k, v).sum().backward(), rounds)
        )
        print(
            f"{name:34s} forward {forward:8.1f} ms   forward+backward "
            f"{'   n/a' if both is None else f'{both:8.1f} ms'}   (T={T}, window={window}, B={B}, H={H}, "
            f"Dh={Dh}, {torch.cuda.get_device_name() if device == 'cuda' else f'{torch.get_num_threads()} threads'})"
        )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
