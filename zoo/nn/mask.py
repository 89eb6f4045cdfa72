"""Boolean attention masks (True = may attend), built once per stack forward, and the band of
sliding-window attention as a FlexAttention mask_mod that other mask_mods can be and-ed with."""

from __future__ import annotations

import torch


def attention_mask(
    *,
    q_len: int,
    k_len: int,
    causal: bool,
    key_padding: torch.Tensor | None,
    device: torch.device,
    window: int | None = None,
) -> torch.Tensor | None:
    """Combine causality and key padding into one mask of shape (B or 1, 1, T, S), or None
    when every query may see every key.

    Causality is by index, with the T queries being the last T of the S keys (so a KV cache
    works): query i may see key j when j <= i + S - T. key_padding is (B, S) with 1 for a token
    and 0 for padding. `window` (sliding-window attention) bands the mask: a causal query at
    index i sees keys i - window + 1 .. i (transformers' sliding_window), a bidirectional one
    keys within (window - 1) // 2 of it either way (`in_band`). A query that could see no key
    at all (a left-padding position) is let see every key instead, so softmax stays finite; its
    output is never used.
    """
    mask = None
    if causal or window is not None:
        i = torch.arange(q_len, device=device)[:, None] + (k_len - q_len)  # (T, 1) the queries' key index
        j = torch.arange(k_len, device=device)[None, :]  # (1, S)
        seen = j <= i if causal else torch.ones_like(j <= i)  # (T, S)
        if window is not None:
            seen = seen & in_band(i, j, window, causal)
        mask = seen[None, None]  # (1, 1, T, S)
    if key_padding is not None:
        if key_padding.shape[-1] != k_len:
            raise ValueError(f"attention mask covers {key_padding.shape[-1]} positions but there are {k_len} keys")
        keys = key_padding.bool()[:, None, None, :]  # (B, 1, 1, S)
        mask = keys if mask is None else mask & keys  # (B, 1, T, S)
    if mask is not None:
        mask = mask | ~mask.any(dim=-1, keepdim=True)
    return mask


def in_band(q_idx, kv_idx, window: int, causal: bool):
    """Whether key kv_idx is within the sliding window of query q_idx (both indices into the
    same sequence; tensors or ints): causal, q_idx - kv_idx < window (transformers'
    sliding_window_overlay: kv_idx > q_idx - window); bidirectional, |q_idx - kv_idx| <=
    (window - 1) // 2 (a symmetric band of `window` keys for an odd window)."""
    if causal:
        return kv_idx > q_idx - window
    return (q_idx - kv_idx).abs() <= (window - 1) // 2


def band_mask_mod(window: int, causal: bool, offset: int = 0):
    """The sliding window as a FlexAttention mask_mod (b, h, q_idx, kv_idx) -> bool, causality
    included when `causal`; the T queries are keys offset .. offset + T - 1. An and of it with
    another mask_mod (a document mask) gives both."""

    def mask_mod(b, h, q_idx, kv_idx):
        q = q_idx + offset
        band = in_band(q, kv_idx, window, causal)
        return band & (kv_idx <= q) if causal else band

    return mask_mod


def document_mask(document_ids: torch.Tensor) -> torch.Tensor:
    """Block-diagonal causal mask of packed documents: (B, T) document ids -> (B, 1, T, T),
    query i may see key j when j <= i and both belong to the same document. A boolean mask, so
    other masks (key padding, a sliding window's band) compose with it by `&`; the same rule as
    a FlexAttention mask_mod is `zoo.nn.documents.document_mask_mod`."""
    T = document_ids.shape[-1]
    i = torch.arange(T, device=document_ids.device)
    causal = (i[None, :] <= i[:, None])[None]  # (1, T, T)
    same = document_ids[:, :, None] == document_ids[:, None, :]  # (B, T, T)
    return (causal & same)[:, None]  # (B, 1, T, T)
