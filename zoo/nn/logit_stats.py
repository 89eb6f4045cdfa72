"""Statistics of the logits a Transformer computes, for the training-instability monitor
(Wortsman et al. 2023, "Small-scale proxies for large-scale Transformer training
instabilities"): the largest attention logit of a layer, whose growth precedes attention-entropy
collapse (QK-norm prevents it), and the mean output logit and log-partition log Z of the output
head, whose drift to large negative values precedes output-logit divergence (z-loss prevents it).

Both are read without gradients and in blocks, so the full score matrix (B, H, T, S) or the
logits (N, V) are never whole in memory."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

_BLOCK_ELEMENTS = 1 << 22  # scores held at once by `max_attention_logit` (16 MiB of float32)


def _boolean(mask, T: int, S: int, device: torch.device) -> torch.Tensor | None:
    """A mask as the boolean (B or 1, 1, T, S) tensor, True = may attend: a tensor as it is; a
    mask object that makes its own (packed documents: `.dense()`); a FlexAttention BlockMask
    (a sliding band) evaluated token by token from its `mask_mod`."""
    if mask is None or isinstance(mask, torch.Tensor):
        return mask
    if callable(getattr(mask, "dense", None)):
        return mask.dense()
    if callable(getattr(mask, "mask_mod", None)):
        from torch.nn.attention.flex_attention import create_mask

        return create_mask(mask.mask_mod, None, None, T, S, device=device)  # (1, 1, T, S)
    raise TypeError(f"an attention mask of type {type(mask).__name__} is not known here")


@torch.no_grad()
def max_attention_logit(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    scale: float | None = None,
    mask: torch.Tensor | None = None,
    causal: bool = False,
) -> torch.Tensor:
    """max of q·kᵀ · scale over the (query, key) pairs a query may attend, over every head and
    row: a detached float32 scalar.

    q (B, H, T, Dh); k (B, Hkv, S, Dh) with H a multiple of Hkv (the keys are shared, not
    repeated); mask (B or 1, 1, T, S) boolean, True = may attend; `causal`: the T queries are the
    last T of the S keys (as in `zoo.nn.attention.attention`); a mask object (a FlexAttention
    BlockMask, packed documents) counts the pairs it allows. Additive position biases (ALiBi,
    relative buckets) are not part of the logit measured here: it is the query-key product."""
    B, H, T, Dh = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(Dh) if scale is None else scale
    mask = _boolean(mask, T, S, q.device)  # (B or 1, 1, T, S) or None
    qg = q.reshape(B, Hkv, H // Hkv, T, Dh).float()  # (B, Hkv, G, T, Dh)
    kt = k.float().transpose(-2, -1)[:, :, None]  # (B, Hkv, 1, Dh, S)
    block = max(1, _BLOCK_ELEMENTS // max(1, B * H * S))  # queries per block
    best = torch.full((), float("-inf"), device=q.device)
    for start in range(0, T, block):
        stop = min(T, start + block)
        scores = (qg[:, :, :, start:stop] @ kt) * scale  # (B, Hkv, G, t, S)
        keep = None
        if mask is not None:
            keep = mask[:, :, start:stop][:, :, None]  # (B or 1, 1, 1, t, S)
        if causal:
            rows = torch.arange(start, stop, device=q.device)[:, None] + (S - T)  # (t, 1) key index of each query
            allowed = torch.arange(S, device=q.device)[None, :] <= rows  # (t, S)
            keep = allowed if keep is None else keep & allowed
        if keep is not None:
            scores = scores.masked_fill(~keep, float("-inf"))
        best = torch.maximum(best, scores.amax())
    return best


@torch.no_grad()
def output_logit_stats(
    logits_of: Callable[[torch.Tensor], torch.Tensor], hidden: torch.Tensor, *, chunk: int = 1024
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(mean output logit, mean log Z, number of rows) over the rows of hidden (N, D), where
    `logits_of` maps (n, D) -> (n, V) (the model's output head) and log Z = logsumexp of a row's
    logits. The logits are made `chunk` rows at a time, in float32; nothing is kept for backward."""
    N = hidden.shape[0]
    logit_sum = torch.zeros((), dtype=torch.float64, device=hidden.device)
    log_z_sum = torch.zeros((), dtype=torch.float64, device=hidden.device)
    for start in range(0, N, chunk):
        logits = logits_of(hidden[start : start + chunk]).float()  # (c, V)
        logit_sum += logits.mean(dim=-1).sum().double()
        log_z_sum += torch.logsumexp(logits, dim=-1).sum().double()
    n = max(N, 1)
    return (logit_sum / n).float(), (log_z_sum / n).float(), N
