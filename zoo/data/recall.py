"""Multi-query associative recall (MQAR) sequences, drawn deterministically with numpy: the
layout of `zoo.config.schema.recall` (Zoology's generator, with each query's value written
after it), and their text, one character per symbol, that the char tokenizer reads.

`draw(spec, n, seed)` gives the same sequences for the same arguments on every machine
(numpy's PCG64 `default_rng(seed)`, one example after another)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zoo.config.schema.recall import RecallSpec

SYMBOL_BASE = 0x4E00  # symbol s is written chr(SYMBOL_BASE + s)


@dataclass(frozen=True)
class RecallSet:
    """n sequences of one spec.

    - `symbols` [n, L]: the sequences (L = spec.seq_len).
    - `keys` [n, N]: the position of each pair's key in the pairs (2i).
    - `queries` [n, N]: the position of the same key in the query region; the value follows it.
    - `values` [n, N]: the value of each pair (the answer at its query)."""

    spec: RecallSpec
    symbols: np.ndarray
    keys: np.ndarray
    queries: np.ndarray
    values: np.ndarray

    @property
    def distances(self) -> np.ndarray:
        """[n, N]: positions from each key to its query."""
        return self.queries - self.keys


def slot_probabilities(spec: RecallSpec) -> np.ndarray:
    """[S]: P(slot g) = a * (g + 1)^(a - 1), normalised (Zoology's power law)."""
    a = spec.power_a
    p = a * np.arange(1, spec.slots + 1, dtype=np.float64) ** (a - 1)
    return p / p.sum()


def draw(spec: RecallSpec, n: int, seed: int) -> RecallSet:
    """`n` sequences of `spec` from `seed`."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"draw needs n >= 1 sequences, got {n!r}")
    rng = np.random.default_rng(seed)
    pairs, length, half = spec.num_kv_pairs, spec.seq_len, spec.vocab_size // 2
    p = slot_probabilities(spec)
    symbols = np.empty((n, length), dtype=np.int64)
    keys = np.empty((n, pairs), dtype=np.int64)
    values = np.empty((n, pairs), dtype=np.int64)
    slots = np.empty((n, pairs), dtype=np.int64)
    for row in range(n):  # one sequence after another: the first k do not depend on n
        symbols[row] = rng.integers(0, spec.vocab_size, size=length)  # filler, overwritten below
        keys[row] = rng.choice(spec.num_keys, size=pairs, replace=False) + 1
        values[row] = rng.choice(spec.num_values, size=pairs, replace=False) + half
        slots[row] = rng.choice(spec.slots, size=pairs, replace=False, p=p)
    key_at = np.broadcast_to(2 * np.arange(pairs), (n, pairs))  # (n, N)
    query_at = 2 * pairs + 2 * slots  # (n, N)
    rows = np.arange(n)[:, None]  # (n, 1)
    symbols[rows, key_at] = keys
    symbols[rows, key_at + 1] = values
    symbols[rows, query_at] = keys
    symbols[rows, query_at + 1] = values
    return RecallSet(spec, symbols, np.ascontiguousarray(key_at), query_at, values)


def as_text(symbols: np.ndarray) -> str:
    """One sequence [L] as L characters."""
    return "".join(chr(SYMBOL_BASE + int(s)) for s in symbols)


def alphabet(spec: RecallSpec) -> str:
    """Every symbol's character, in id order."""
    return "".join(chr(SYMBOL_BASE + s) for s in range(spec.vocab_size))
