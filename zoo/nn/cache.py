"""Key/value caches for incremental decoding, and the recurrent layers' fixed-size states
(`zoo.nn.recurrent_state.RecurrentState`) beside them."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from zoo.nn.host import host_reads_are_free
from zoo.nn.recurrent_state import RecurrentState


class KVCache:
    """Self-attention keys and values seen so far, with their positions (B, S). A scheme that
    transforms each key by its own position alone (RoPE: `keys_transformed_alone`) has its keys
    cached already transformed, so a step rotates only the new keys; for every other scheme the
    keys are cached as projected and `attend` sees the whole cached sequence each step. The
    values' width is their own (B, Hkv, S, Dv): multi-head latent attention
    (`zoo.nn.latent_attention`) keeps its latent (B, 1, S, r) as the keys and its shared rotated
    key (B, 1, S, d_r) as the values, in these same classes.

    Storage grows by doubling, so appending a step copies nothing but the new entries."""

    static = False  # update returns exactly the `length` entries seen so far

    def __init__(self) -> None:
        self._k: torch.Tensor | None = None  # (B, Hkv, capacity, Dh)
        self._v: torch.Tensor | None = None
        self._positions: torch.Tensor | None = None  # (B or 1, capacity)
        self.length = 0

    @property
    def k(self) -> torch.Tensor | None:
        return None if self._k is None else self._k[:, :, : self.length]  # (B, Hkv, S, Dh)

    @property
    def v(self) -> torch.Tensor | None:
        return None if self._v is None else self._v[:, :, : self.length]

    @property
    def positions(self) -> torch.Tensor | None:
        return None if self._positions is None else self._positions[:, : self.length]  # (B or 1, S)

    def _buffers(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The keys, values and positions held, once the first update has made them."""
        if self._k is None or self._v is None or self._positions is None:
            raise RuntimeError("the cache holds nothing yet: its first update makes its buffers")
        return self._k, self._v, self._positions

    def _grow(self, needed: int) -> None:
        old_k, old_v, old_p = self._buffers()
        capacity = max(needed, 2 * old_k.shape[2], 16)
        B, H, _, Dh = old_k.shape
        k = old_k.new_empty(B, H, capacity, Dh)
        v = old_v.new_empty(B, H, capacity, old_v.shape[-1])  # values may be narrower or wider
        p = old_p.new_empty(old_p.shape[0], capacity)
        n = self.length
        k[:, :, :n], v[:, :, :n] = old_k[:, :, :n], old_v[:, :, :n]
        p[:, :n] = old_p[:, :n]
        self._k, self._v, self._positions = k, v, p

    def _match_rows(self, positions: torch.Tensor) -> torch.Tensor:
        """Shared (1, S) positions meeting per-row (B, T) ones: both become per-row."""
        held = self._buffers()[2]
        if positions.shape[0] != held.shape[0]:
            rows = max(positions.shape[0], held.shape[0])
            self._positions = held.expand(rows, -1).clone()
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
        keys, values, held = self._buffers()
        keys[:, :, self.length : self.length + T] = k
        values[:, :, self.length : self.length + T] = v
        held[:, self.length : self.length + T] = positions
        self.length += T
        return self.k, self.v, self.positions

    def reorder(self, index: torch.Tensor) -> None:
        """Select batch rows (beam search)."""
        if self._k is not None:
            keys, values, held = self._buffers()
            self._k, self._v = keys[index], values[index]
            if held.shape[0] > 1:  # (1, S) positions are shared by every row
                self._positions = held[index]


class StaticKVCache(KVCache):
    """Keys and values in buffers of a fixed `capacity` allocated at the first update, written
    at the slots a device tensor `slot` points to: every decoding step sees tensors of the same
    shapes and no Python number that changes, so a compiled step is compiled once and on a GPU
    replays as one CUDA graph (the buffers and `slot` keep their addresses: beam search reorders
    them in place). Slots at and after `slot` are zeros; the stack masks them out
    (`Stack.forward`). `length` reads `slot` on the host: for callers outside the step."""

    static = True

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.slot: torch.Tensor | None = None  # () long: the next slot to write

    @property
    def length(self) -> int:
        return 0 if self.slot is None else int(self.slot)

    @length.setter
    def length(self, value: int) -> None:  # KVCache.__init__ sets 0
        if value:
            raise ValueError("a static cache's length follows its slot")

    def _slot(self) -> torch.Tensor:
        """The device tensor of the next slot to write, once the first update has made it."""
        if self.slot is None:
            raise RuntimeError("the cache holds nothing yet: its first update makes its slot")
        return self.slot

    def update(self, k, v, positions):
        """Write (B, Hkv, T, Dh) keys/values and (B or 1, T) positions at slots [slot,
        slot + T); return the whole buffers (B, Hkv, capacity, Dh), (B or 1, capacity)."""
        B, Hkv, T, Dh = k.shape
        if self._k is None:
            self._k = k.new_zeros(B, Hkv, self.capacity, Dh)
            self._v = v.new_zeros(B, Hkv, self.capacity, v.shape[-1])
            self._positions = positions.new_zeros(positions.shape[0], self.capacity)
            self.slot = torch.zeros((), dtype=torch.long, device=k.device)
            if not torch.compiler.is_compiling():  # traced code may not mark: `mark_static` after it
                self.mark_static()
        slot = self._slot()
        if host_reads_are_free(slot) and int(slot) + T > self.capacity:
            raise ValueError(f"the static cache holds {self.capacity} positions; {int(slot)} + {T} do not fit")
        positions = self._match_rows(positions)
        keys, values, held = self._buffers()
        slots = slot + torch.arange(T, device=k.device)  # (T,)
        keys.index_copy_(2, slots, k.to(keys.dtype))
        values.index_copy_(2, slots, v.to(values.dtype))
        held.index_copy_(1, slots, positions.to(held.dtype))
        slot.add_(T)
        return keys, values, held

    def mark_static(self) -> None:
        """Tell torch.compile that the buffers keep their addresses, so that CUDA graphs write
        into them in place instead of copying them in at every replay. Called outside compiled
        code (dynamo refuses to trace `mark_static_address`); a no-op before the first update
        and off CUDA."""
        if self._k is not None and self._k.device.type == "cuda":
            for t in (self._k, self._v, self._positions, self.slot):
                torch._dynamo.mark_static_address(t)

    def reorder(self, index: torch.Tensor) -> None:
        """Select batch rows (beam search), in place: the buffers keep their addresses."""
        if self._k is not None:
            keys, values, held = self._buffers()
            keys.copy_(keys[index])
            values.copy_(values[index])
            if held.shape[0] > 1:
                held.copy_(held[index])


class SlidingKVCache(KVCache):
    """The growing cache of a sliding-window layer (`model.attention=sliding`): it keeps only
    the last window - 1 keys, values and positions, what the next query sees besides itself.
    `update` returns those and the T new ones (the stack's band mask trims a query's view to
    its window); `length` counts every position seen, `kept` the ones held."""

    def __init__(self, window: int) -> None:
        super().__init__()
        self.window = window
        self._seen = 0

    @property
    def length(self) -> int:
        return self._seen

    @length.setter
    def length(self, value: int) -> None:  # KVCache.__init__ sets 0
        self._seen = value

    @property
    def kept(self) -> int:
        return 0 if self._k is None else self._k.shape[2]

    @property
    def k(self) -> torch.Tensor | None:
        return self._k  # (B, Hkv, kept, Dh)

    @property
    def v(self) -> torch.Tensor | None:
        return self._v

    @property
    def positions(self) -> torch.Tensor | None:
        return self._positions  # (B or 1, kept)

    def update(self, k, v, positions):
        """Append (B, Hkv, T, Dh) keys/values and (B or 1, T) positions; return the kept ones
        and the new ones, (B, Hkv, kept + T, Dh) and (B or 1, kept + T)."""
        self._seen += k.shape[2]
        if self._k is not None:
            positions = self._match_rows(positions)
            old_k, old_v, old_p = self._buffers()
            k = torch.cat([old_k, k], dim=2)  # (B, Hkv, kept + T, Dh)
            v = torch.cat([old_v, v], dim=2)
            positions = torch.cat([old_p, positions], dim=1)  # (B or 1, kept + T)
        first = max(0, k.shape[2] - (self.window - 1))
        # copies: a view would hold on to the whole tensor it is cut from
        self._k, self._v = k[:, :, first:].clone(), v[:, :, first:].clone()  # (B, Hkv, kept, Dh)
        self._positions = positions[:, first:].clone()  # (B or 1, kept)
        return k, v, positions


class SlidingStaticKVCache(StaticKVCache):
    """The static cache of a sliding-window layer: a ring of min(window, capacity) slots, the
    position seen n-th written at slot n mod ring. A one-token step writes its slot and returns
    the whole ring (the same shapes and addresses at every step, as CUDA graphs need; the stack
    masks the slots not yet written, `zoo.nn.block.Stack`); a longer update (the prompt, run
    eagerly) returns the ring's entries in order followed by the new ones, and keeps the last
    ring of them. `capacity` is the cache's bound on positions, as for the full layers."""

    def __init__(self, capacity: int, window: int) -> None:
        super().__init__(capacity)
        self.window = window
        self.ring = min(window, capacity)

    def update(self, k, v, positions):
        B, Hkv, T, Dh = k.shape
        R = self.ring
        if self._k is None:
            self._k = k.new_zeros(B, Hkv, R, Dh)
            self._v = v.new_zeros(B, Hkv, R, v.shape[-1])
            self._positions = positions.new_zeros(positions.shape[0], R)
            self.slot = torch.zeros((), dtype=torch.long, device=k.device)
            if not torch.compiler.is_compiling():
                self.mark_static()
        slot = self._slot()
        if host_reads_are_free(slot) and int(slot) + T > self.capacity:
            raise ValueError(f"the static cache holds {self.capacity} positions; {int(slot)} + {T} do not fit")
        positions = self._match_rows(positions)
        keys, values, held = self._buffers()
        if T == 1:  # a decoding step: no host read
            ring = (slot % R)[None]  # (1,)
            keys.index_copy_(2, ring, k.to(keys.dtype))
            values.index_copy_(2, ring, v.to(values.dtype))
            held.index_copy_(1, ring, positions.to(held.dtype))
            slot.add_(1)
            return keys, values, held  # (B, Hkv, R, Dh), (B or 1, R)
        past = int(slot)
        kept = min(past, R)
        order = (past - kept + torch.arange(kept, device=k.device)) % R  # (kept,) the ring in order
        out_k = torch.cat([keys.index_select(2, order), k.to(keys.dtype)], dim=2)  # (B, Hkv, kept + T, Dh)
        out_v = torch.cat([values.index_select(2, order), v.to(values.dtype)], dim=2)
        out_p = torch.cat([held.index_select(1, order), positions.to(held.dtype)], dim=1)  # (B or 1, kept + T)
        new = min(T, R)
        slots = (past + T - new + torch.arange(new, device=k.device)) % R  # (new,)
        keys.index_copy_(2, slots, out_k[:, :, -new:])
        values.index_copy_(2, slots, out_v[:, :, -new:])
        held.index_copy_(1, slots, out_p[:, -new:])
        slot.add_(T)
        return out_k, out_v, out_p


@dataclass
class LayerCache:
    """One layer's: its self-attention's keys and values, or for a recurrent layer its `state`
    (then `self_attn` stays empty), and cross-attention's keys and values."""

    self_attn: KVCache = field(default_factory=KVCache)
    cross_kv: tuple[torch.Tensor, torch.Tensor] | None = None  # (B, Hkv, S, Dh) each, computed once
    state: RecurrentState | None = None  # a recurrent layer's (zoo.nn.recurrent_state)

    def reorder(self, index: torch.Tensor) -> None:
        self.self_attn.reorder(index)
        if self.state is not None:
            self.state.reorder(index)
        if self.cross_kv is not None:
            self.cross_kv = (self.cross_kv[0][index], self.cross_kv[1][index])


def _layer_cache(capacity: int | None, window: int | None) -> KVCache:
    if window is None:
        return KVCache() if capacity is None else StaticKVCache(capacity)
    return SlidingKVCache(window) if capacity is None else SlidingStaticKVCache(capacity, window)


@dataclass
class Cache:
    """One `LayerCache` per decoder layer."""

    layers: list[LayerCache]

    @classmethod
    def empty(
        cls,
        n_layers: int,
        capacity: int | None = None,
        windows: list[int | None] | None = None,
        recurrent: list[bool] | None = None,
    ) -> Cache:
        """Growing caches, or static ones of `capacity` positions (`StaticKVCache`); `windows`
        (one per layer, None = full) gives a sliding layer a cache that keeps only its window,
        `recurrent` (one per layer) a recurrent layer its fixed-size state and no keys."""
        windows = windows if windows is not None else [None] * n_layers
        recurrent = recurrent if recurrent is not None else [False] * n_layers
        if len(windows) != n_layers or len(recurrent) != n_layers:
            raise ValueError(f"{len(windows)} windows and {len(recurrent)} kinds for {n_layers} layers")
        return cls(
            [
                LayerCache(state=RecurrentState(capacity)) if r else LayerCache(self_attn=_layer_cache(capacity, w))
                for w, r in zip(windows, recurrent)
            ]
        )

    @property
    def _clock(self) -> KVCache | RecurrentState | None:
        """What counts the positions seen: the first attention layer's keys, or in a stack of
        recurrent layers only the first one's state."""
        for layer in self.layers:
            if layer.state is None:
                return layer.self_attn
        return self.layers[0].state if self.layers else None

    @property
    def static(self) -> bool:
        clock = self._clock
        return clock is not None and clock.static

    @property
    def _static_first(self) -> StaticKVCache | RecurrentState | None:
        first = self._clock
        return (
            first if isinstance(first, StaticKVCache) or (isinstance(first, RecurrentState) and first.static) else None
        )

    @property
    def capacity(self) -> int | None:
        first = self._static_first
        return first.capacity if first is not None else None

    @property
    def length(self) -> int:
        clock = self._clock
        return clock.length if clock is not None else 0

    def state_bytes(self) -> int:
        """The bytes the recurrent layers' states hold (the same at every length)."""
        return sum(layer.state.nbytes() for layer in self.layers if layer.state is not None)

    @property
    def slot(self) -> torch.Tensor | None:
        """A static cache's next slot as a () device tensor (None before its first update)."""
        first = self._static_first
        return first.slot if first is not None else None

    def next_positions(self, T: int, device: torch.device) -> torch.Tensor:
        """(1, T): the positions of T tokens appended after what the cache holds, counted on
        the device for a static cache (no Python number that changes from step to step)."""
        if self.slot is not None:
            return (self.slot + torch.arange(T, device=device))[None]  # (1, T)
        return torch.arange(self.length, self.length + T, device=device)[None]  # (1, T)

    def mark_static(self) -> None:
        """`StaticKVCache.mark_static` for every layer (a prefill run compiled allocates the
        buffers where they cannot be marked): call it outside compiled code."""
        for layer in self.layers:
            if isinstance(layer.self_attn, StaticKVCache):
                layer.self_attn.mark_static()
            if layer.state is not None:
                layer.state.mark_static()

    def reorder(self, index: torch.Tensor) -> None:
        for layer in self.layers:
            layer.reorder(index)
