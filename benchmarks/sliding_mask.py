"""Sliding-window attention on one device: SDPA with a boolean band mask against FlexAttention
with the band as a block mask (compiled), and the full causal SDPA for scale: one attention
call's forward, and forward + backward where the device has one (FlexAttention has no backward
on CPU in torch 2.13). Prints milliseconds per call (median of `rounds`).

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


def _time(fn, rounds: int) -> float:
    fn()  # warm-up (and compilation)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main(T: int = 1024, window: int = 128, rounds: int = 5) -> None:
    torch.manual_seed(0)
    B, H, Dh = 1, 4, 64
    q, k, v = (torch.randn(B, H, T, Dh, requires_grad=True) for _ in range(3))  # (B, H, T, Dh)
    mask = attention_mask(q_len=T, k_len=T, causal=True, key_padding=None, device=q.device, window=window)
    block = create_block_mask(band_mask_mod(window, causal=True), None, None, T, T, device="cpu")
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
            f"Dh={Dh}, {torch.get_num_threads()} threads)"
        )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
