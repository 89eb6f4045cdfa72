"""Boolean attention masks (True = may attend), built once per stack forward."""

from __future__ import annotations

from typing import Optional

import torch


def attention_mask(
    *,
    q_len: int,
    k_len: int,
    causal: bool,
    key_padding: Optional[torch.Tensor],
    device: torch.device,
) -> Optional[torch.Tensor]:
    """Combine causality and key padding into one mask of shape (B or 1, 1, T, S), or None
    when every query may see every key.

    Causality is by index, with the T queries being the last T of the S keys (so a KV cache
    works): query i may see key j when j <= i + S - T. key_padding is (B, S) with 1 for a token
    and 0 for padding. A query that could see no key at all (a left-padding position) is let
    see every key instead, so softmax stays finite; its output is never used.
    """
    mask = None
    if causal:
        i = torch.arange(q_len, device=device)[:, None]
        j = torch.arange(k_len, device=device)[None, :]
        mask = (j <= i + (k_len - q_len))[None, None]  # (1, 1, T, S)
    if key_padding is not None:
        if key_padding.shape[-1] != k_len:
            raise ValueError(
                f"attention mask covers {key_padding.shape[-1]} positions but there are {k_len} keys"
            )
        keys = key_padding.bool()[:, None, None, :]  # (B, 1, 1, S)
        mask = keys if mask is None else mask & keys  # (B, 1, T, S)
    if mask is not None:
        mask = mask | ~mask.any(dim=-1, keepdim=True)
    return mask


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
