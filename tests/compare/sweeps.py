"""Synthetic sweeps on disk, as zoo-train leaves them but without training: each run directory
has `.hydra/overrides.yaml` and `.hydra/config.yaml`, `metrics.csv`, and `summary.json` (a
finished run, with its final metrics, model size, FLOPs, tokens and tokenizer) or `failed.json`
(a run that diverged: its error, and the metrics it logged before)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

VOCAB = 256  # the synthetic runs' vocabulary: the loss of a uniform prediction is ln 256 ≈ 5.545


def write_run(
    path: Path,
    config: dict[str, Any],
    loss: float | None,
    *,
    flops: int = 1000,
    params: int = 500,
    tokens: int = 20_000,
    error: str = "the training loss is nan at step 3",
) -> Path:
    """One run directory. `config` is flat ("model.norm": "pre"); `loss` None: the run failed
    (diverged) with `error`; a float: it finished with that final val/loss."""
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "overrides.yaml").write_text("".join(f"- {k}={v}\n" for k, v in config.items()))
    tree: dict = {}
    for key, value in config.items():
        node = tree
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(tree))
    first = 5.0 if loss is None else loss + 1.0
    (path / "metrics.csv").write_text(f"step,tokens_seen,val/loss\n1,{tokens // 2},{first}\n")
    if loss is None:
        (path / "failed.json").write_text(json.dumps({"status": "failed", "error": error, "step": 3}))
        return path
    summary = {
        "status": "finished",
        "metrics": {"val/loss": loss, "val/ppl": math.exp(loss)},
        "model": {"non_embedding_params": params, "total_params": params + 64 * VOCAB, "flops_per_token": flops},
        "tokens_seen": tokens,
        "tokens_per_s": 1000.0,
        "wall_seconds": 20.0,
        "data": {"train_tokens": 4 * tokens},
        "tokenizer": {"kind": "byte", "vocab_size": VOCAB, "digest": "0" * 64},
    }
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def write_sweep(root: Path, runs: list[tuple[dict[str, Any], float | None]], **kwargs) -> Path:
    """A sweep directory of numbered jobs, one per (config, final loss or None for a failure)."""
    for i, (config, loss) in enumerate(runs):
        extra = {k: v(config) if callable(v) else v for k, v in kwargs.items()}
        write_run(root / str(i), config, loss, **extra)
    return root
