"""The one interface every position scheme implements.

Schemes act in different places: added to the embeddings (sinusoidal, learned), added to the
attention scores (T5 relative bias, ALiBi, Shaw), or rotating queries and keys (RoPE). Every
scheme has the same hooks, identity by default, so a block never branches on the kind.

Positions are explicit integer tensors of shape (B, T), so a KV cache, left padding and length
extrapolation all work by passing the right positions.
"""

from __future__ import annotations

import torch
from torch import nn

from zoo.config.facts.positions import POSITION_FACTS, PositionKind
from zoo.config.facts.starts import Starts


class PositionScheme(nn.Module):
    """Identity position scheme (also the `none` kind).

    Class attributes tell the model how to use a scheme:
    - `kind`: the `PositionKind` it implements, its key in `zoo.nn.position.POSITIONS` and in
      `zoo.config.facts.positions.POSITION_FACTS` (None here: the base is no scheme of its own).
    - `shared_across_layers`: one instance serves every layer of a stack (False: one per layer).
    - `needs_attention_weights`: `value_term` must see the attention weights, so attention
      takes the explicit softmax path instead of `scaled_dot_product_attention`.
    - `keys_transformed_alone`: `attend` changes each key according to that key's own position
      only and adds no bias (RoPE), so a KV cache may keep keys after `attend` and a decoding
      step transforms only its new keys.
    - `bias_from_positions_only`: `attend` leaves q and k alone and its bias depends on the
      positions only (T5 bias, ALiBi), so a shared scheme's bias is computed once per stack
      forward and reused by every layer (`SharedBias`).
    """

    kind: PositionKind | None = None
    shared_across_layers: bool = True
    needs_attention_weights: bool = False
    keys_transformed_alone: bool = False
    bias_from_positions_only: bool = False

    @property
    def starts(self) -> Starts:
        """How the scheme's own parameters start: its row's `starts` (none for the base)."""
        return POSITION_FACTS[self.kind].starts if self.kind is not None else {}

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x (B, T, D), positions (B, T) -> (B, T, D)."""
        return x

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        q_positions: torch.Tensor,
        k_positions: torch.Tensor | None,  # None: keys without positions (cross-attention's memory)
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """q (B, H, T, Dh), k (B, Hkv, S, Dh), q_positions (B, T), k_positions (B, S) ->
        (q, k, bias) where bias is None or additive to the scaled scores, broadcastable to
        (B, H, T, S)."""
        return q, k, None

    def value_term(
        self, weights: torch.Tensor, q_positions: torch.Tensor, k_positions: torch.Tensor | None
    ) -> torch.Tensor | None:
        """weights (B, H, T, S) -> a term added to the attention output, (B, H, T, Dh), or None."""
        return None


def relative_offsets(q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
    """k_position - q_position for every pair: (B, T), (B, S) -> (B, T, S)."""
    return k_positions[:, None, :] - q_positions[:, :, None]


class SharedBias:
    """One stack forward's view of a shared bias scheme: the first layer's `attend` computes
    the bias, later layers with the same position tensors reuse it (Raffel et al. 2020 share
    T5's bias across layers the same way). Lives for one forward only."""

    def __init__(self, scheme: PositionScheme) -> None:
        self.scheme = scheme
        self._memo: tuple[torch.Tensor, torch.Tensor, torch.dtype, torch.Tensor | None] | None = None

    def __getattr__(self, name: str):
        return getattr(self.scheme, name)

    def attend(self, q, k, q_positions, k_positions):
        memo = self._memo
        if memo is not None and memo[0] is q_positions and memo[1] is k_positions and memo[2] == q.dtype:
            return q, k, memo[3]
        q, k, bias = self.scheme.attend(q, k, q_positions, k_positions)
        self._memo = (q_positions, k_positions, q.dtype, bias)
        return q, k, bias
