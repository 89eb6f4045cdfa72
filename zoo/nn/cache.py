"""Key/value caches for incremental decoding."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch


class KVCache:
    """Self-attention keys and values seen so far, before any position transform, with their
    positions (B, S). Position schemes are applied to the whole cached sequence each step, so
    every scheme (RoPE included) works through the same `attend` hook.

    Storage grows by doubling, so appending a step copies nothing but the new entries."""

    static = False  # update returns exactly the `length` entries seen so far

    def __init__(self) -> None:
        self._k: Optional[torch.Tensor] = None  # (B, Hkv, capacity, Dh)
        self._v: Optional[torch.Tensor] = None
        self._positions: Optional[torch.Tensor] = None  # (B or 1, capacity)
        self.length = 0

    @property
    def k(self) -> Optional[torch.Tensor]:
        return None if self._k is None else self._k[:, :, : self.length]  # (B, Hkv, S, Dh)

    @property
    def v(self) -> Optional[torch.Tensor]:
        return None if self._v is None else self._v[:, :, : self.length]

    @property
    def positions(self) -> Optional[torch.Tensor]:
        return None if self._positions is None else self._positions[:, : self.length]  # (B or 1, S)

    def _grow(self, needed: int) -> None:
        capacity = max(needed, 2 * (self._k.shape[2] if self._k is not None else 0), 16)
        B, H, _, Dh = self._k.shape
        k = self._k.new_empty(B, H, capacity, Dh)
        v = self._v.new_empty(B, H, capacity, Dh)
        p = self._positions.new_empty(self._positions.shape[0], capacity)
        k[:, :, : self.length], v[:, :, : self.length] = self.k, self.v
        p[:, : self.length] = self.positions
        self._k, self._v, self._positions = k, v, p

    def _match_rows(self, positions: torch.Tensor) -> torch.Tensor:
        """Shared (1, S) positions meeting per-row (B, T) ones: both become per-row."""
        if positions.shape[0] != self._positions.shape[0]:
            rows = max(positions.shape[0], self._positions.shape[0])
            self._positions = self._positions.expand(rows, -1).clone()
            positions = positions.expand(rows, -1)
        return positions

    def update(self, k, v, positions):
        """Append (B, Hkv, T, Dh) keys/values and (B or 1, T) positions; return the whole cache."""
        T = k.shape[2]
        if self._k is None:
            self._k, self._v, self._positions = k, v, positions
            self.length = T
            return self.k, self.v, self.positions
        positions = self._match_rows(positions)
        if self.length + T > self._k.shape[2]:
            self._grow(self.length + T)
        self._k[:, :, self.length : self.length + T] = k
        self._v[:, :, self.length : self.length + T] = v
        self._positions[:, self.length : self.length + T] = positions
        self.length += T
        return self.k, self.v, self.positions

    def reorder(self, index: torch.Tensor) -> None:
        """Select batch rows (beam search)."""
        if self._k is not None:
            self._k, self._v = self._k[index], self._v[index]
            if self._positions.shape[0] > 1:  # (1, S) positions are shared by every row
                self._positions = self._positions[index]


class StaticKVCache(KVCache):
    """Keys and values in buffers of a fixed `capacity` allocated at the first update: every
    decoding step sees tensors of the same shape (B, Hkv, capacity, Dh), so a compiled step is
    compiled once (and on GPU can be replayed as a CUDA graph). Slots at and after `length`
    are zeros; the stack masks them out (`Stack.forward`)."""

    static = True

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity

    def update(self, k, v, positions):
        """Write (B, Hkv, T, Dh) keys/values and (B or 1, T) positions at slots [length,
        length + T); return the whole buffers (B, Hkv, capacity, Dh), (B or 1, capacity)."""
        B, Hkv, T, Dh = k.shape
        if self.length + T > self.capacity:
            raise ValueError(f"the static cache holds {self.capacity} positions; "
                             f"{self.length} + {T} do not fit")
        if self._k is None:
            self._k = k.new_zeros(B, Hkv, self.capacity, Dh)
            self._v = v.new_zeros(B, Hkv, self.capacity, Dh)
            self._positions = positions.new_zeros(positions.shape[0], self.capacity)
        positions = self._match_rows(positions)
        self._k[:, :, self.length : self.length + T] = k
        self._v[:, :, self.length : self.length + T] = v
        self._positions[:, self.length : self.length + T] = positions
        self.length += T
        return self._k, self._v, self._positions


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
    def empty(cls, n_layers: int, capacity: Optional[int] = None) -> "Cache":
        """Growing caches, or static ones of `capacity` positions (`StaticKVCache`)."""
        if capacity is None:
            return cls([LayerCache() for _ in range(n_layers)])
        return cls([LayerCache(self_attn=StaticKVCache(capacity)) for _ in range(n_layers)])

    @property
    def static(self) -> bool:
        return bool(self.layers) and self.layers[0].self_attn.static

    @property
    def capacity(self) -> Optional[int]:
        return self.layers[0].self_attn.capacity if self.static else None

    @property
    def length(self) -> int:
        return self.layers[0].self_attn.length if self.layers else 0

    def reorder(self, index: torch.Tensor) -> None:
        for layer in self.layers:
            layer.reorder(index)
