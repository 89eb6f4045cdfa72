"""A run's lifecycle, the same from zoo-train and from Python (`zoo.train`): a run claimed once
(`claim_run`: checks, run directory, lock, resume), its execution (`execute`), and a typed
outcome with its record. The names below are imported on
first use, so the lock and the rank (read by the tools before torch loads) load no torch."""

from __future__ import annotations

from zoo.config.lazy import lazy_exports

_PUBLIC = {
    "train": "zoo.run.lifecycle",
    "execute": "zoo.run.lifecycle",
    "Outcome": "zoo.run.outcome",
    "RunOutcome": "zoo.run.outcome",
    "claim_run": "zoo.run.preflight",
    "ClaimedRun": "zoo.run.preflight",
    "RunRefused": "zoo.run.preflight",
}

__all__ = sorted(_PUBLIC)

__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC, globals())
