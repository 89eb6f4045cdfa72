"""The one interface every position scheme implements.

Schemes act in different places: added to the embeddings (sinusoidal, learned), added to the
attention scores (T5 relative bias, ALiBi, Shaw), or rotating queries and keys (RoPE). Every
scheme has the same hooks, identity by default, so a block never branches on the kind.

Positions are explicit integer tensors of shape (B, T), so a KV cache, left padding and length
extrapolation all work by passing the right positions.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn


class PositionScheme(nn.Module):
    """Identity position scheme (also the `none` kind).

    Class attributes tell the model how to use a scheme:
    - `shared_across_layers`: one instance serves every layer of a stack (False: one per layer).
    - `needs_attention_weights`: `value_term` must see the attention weights, so attention
      takes the explicit softmax path instead of `scaled_dot_product_attention`.
    - `keys_transformed_alone`: `attend` changes each key according to that key's own position
      only and adds no bias (RoPE), so a KV cache may keep keys after `attend` and a decoding
      step transforms only its new keys.
    """

    shared_across_layers: bool = True
    needs_attention_weights: bool = False
    keys_transformed_alone: bool = False

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x (B, T, D), positions (B, T) -> (B, T, D)."""
        return x

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        q_positions: torch.Tensor,
        k_positions: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """q (B, H, T, Dh), k (B, Hkv, S, Dh), q_positions (B, T), k_positions (B, S) ->
        (q, k, bias) where bias is None or additive to the scaled scores, broadcastable to
        (B, H, T, S)."""
        return q, k, None

    def value_term(
        self, weights: torch.Tensor, q_positions: torch.Tensor, k_positions: torch.Tensor
    ) -> Optional[torch.Tensor]:
        """weights (B, H, T, S) -> a term added to the attention output, (B, H, T, Dh), or None."""
        return None


def relative_offsets(q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
    """k_position - q_position for every pair: (B, T), (B, S) -> (B, T, S)."""
    return k_positions[:, None, :] - q_positions[:, :, None]
