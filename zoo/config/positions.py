"""Facts about each position scheme, in one torch-free table: the parameters it reads, the
sizes it needs even, and whether `model.max_seq_len` bounds the positions it can encode.
Validation, sampling, the inference tools and zoo-compare read these facts from here."""

from __future__ import annotations

from typing import Optional

from zoo.config.model import ModelConfig, PositionKind

# schemes whose positions end at model.max_seq_len (a table of that many rows)
BOUNDED = (PositionKind.learned,)


def max_positions(cfg: ModelConfig) -> Optional[int]:
    """How many positions `cfg`'s scheme can encode: model.max_seq_len for a bounded scheme,
    None for one that extrapolates to any length."""
    return cfg.max_seq_len if cfg.position.kind in BOUNDED else None
