"""Matched budgets: the feed-forward width that gives a model a target number of
non-embedding parameters, so ablation arms compare at equal size (a gated unit has three
matrices, so it gets about 2/3 of a plain unit's width; Shazeer 2020).

The non-embedding count is linear in d_ff, P(F) = A + B·F: it is measured on two models built
on the `meta` device (no memory, no initialisation), so every module counts exactly as
`zoo.summarize` counts it."""

from __future__ import annotations

from dataclasses import replace

from zoo.config.errors import ConfigError


def non_embedding_params(cfg) -> int:
    import torch

    from zoo.models.build import FAMILIES
    from zoo.models.summary import summarize

    with torch.device("meta"):
        model = FAMILIES[cfg.family](cfg)
    return summarize(model).non_embedding_params


def d_ff_for_budget(cfg, budget: int) -> int:
    """The d_ff whose model has the non-embedding parameter count nearest to `budget`."""
    p1 = non_embedding_params(replace(cfg, d_ff=1, param_budget=None))
    p2 = non_embedding_params(replace(cfg, d_ff=2, param_budget=None))
    slope, base = p2 - p1, p1 - (p2 - p1)
    d_ff = round((budget - base) / slope)
    if d_ff < 1:
        raise ConfigError(
            f"model.param_budget={budget:,} is too small: this composition has {base + slope:,} "
            f"non-embedding parameters at d_ff=1")
    return d_ff
