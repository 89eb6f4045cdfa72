"""The largest attention logit written out as sums, for the tests of the instability monitor."""

from __future__ import annotations

import math

import torch


@torch.no_grad()
def max_logit_by_hand(q: torch.Tensor, k: torch.Tensor, keep: torch.Tensor) -> float:
    """max over b, h, i, j with keep[b, i, j] of q[b,h,i]·k[b,h//G,j] / sqrt(Dh), in float64;
    q (B, H, T, Dh), k (B, Hkv, S, Dh), keep (B, T, S) boolean, G = H / Hkv."""
    B, H, T, Dh = q.shape
    G = H // k.shape[1]
    best = -math.inf
    for b in range(B):
        for h in range(H):
            scores = q[b, h].double() @ k[b, h // G].double().T / math.sqrt(Dh)  # (T, S)
            best = max(best, float(scores[keep[b]].max()))
    return best
