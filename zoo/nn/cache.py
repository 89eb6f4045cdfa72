"""Key/value caches for incremental decoding."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch


@dataclass
class KVCache:
    """Self-attention keys and values seen so far, before any position transform, with their
    positions (B, S). Position schemes are applied to the whole cached sequence each step, so
    every scheme (RoPE included) works through the same `attend` hook."""

    k: Optional[torch.Tensor] = None  # (B, Hkv, S, Dh)
    v: Optional[torch.Tensor] = None  # (B, Hkv, S, Dh)
    positions: Optional[torch.Tensor] = None  # (B, S)

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def update(self, k, v, positions):
        """Append (B, Hkv, T, Dh) keys/values and (B, T) positions; return the whole cache."""
        if self.k is None:
            self.k, self.v, self.positions = k, v, positions
        else:
            self.k = torch.cat((self.k, k), dim=2)  # (B, Hkv, S + T, Dh)
            self.v = torch.cat((self.v, v), dim=2)  # (B, Hkv, S + T, Dh)
            self.positions = torch.cat((self.positions, positions), dim=1)  # (B, S + T)
        return self.k, self.v, self.positions

    def reorder(self, index: torch.Tensor) -> None:
        """Select batch rows (beam search)."""
        if self.k is not None:
            self.k, self.v = self.k[index], self.v[index]
            if self.positions.shape[0] > 1:  # (1, S) positions are shared by every row
                self.positions = self.positions[index]


@dataclass
class LayerCache:
    self_attn: KVCache = field(default_factory=KVCache)
    cross_kv: Optional[tuple[torch.Tensor, torch.Tensor]] = None  # (B, Hkv, S, Dh) each, computed once

    def reorder(self, index: torch.Tensor) -> None:
        self.self_attn.reorder(index)
        if self.cross_kv is not None:
            self.cross_kv = (self.cross_kv[0][index], self.cross_kv[1][index])


@dataclass
class Cache:
    """One `LayerCache` per decoder layer."""

    layers: list[LayerCache]

    @classmethod
    def empty(cls, n_layers: int) -> "Cache":
        return cls([LayerCache() for _ in range(n_layers)])

    @property
    def length(self) -> int:
        return self.layers[0].self_attn.length if self.layers else 0

    def reorder(self, index: torch.Tensor) -> None:
        for layer in self.layers:
            layer.reorder(index)
