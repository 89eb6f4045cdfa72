"""The (axis, kind) pairs of `zoo.config.facts.axes.AXES` and tiny configs that select them: a
kind registered there is covered by every contract test here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from tests.conftest import tiny
from tests.covering import joint
from zoo.config import ConfigError, ModelConfig
from zoo.config.facts.axes import AXES, Axis, axis_kinds, model_overrides
from zoo.config.facts.families import FAMILY_FACTS, Family

PAIRS = axis_kinds()
MODEL_PAIRS = [(a, k) for a, k in PAIRS if a.model_level]


def pair_id(value) -> str:
    return value.key if isinstance(value, Axis) else str(value)


def model_kwargs(settings: Mapping[str, Any], family: str = "decoder_only") -> dict:
    """`tiny(family)` with the model keys of `settings` (an axis kind's) applied; the family
    axis's own setting wins over `family`."""
    kw = model_overrides(settings)
    family = kw.pop("family", family)
    position = dict(kw.pop("position", {}))
    cfg = tiny(family, position.pop("kind", "learned"), **kw)
    cfg["position"].update(position)
    return cfg


MODEL_AXES = {a.key: a for a in AXES if a.model_level}
# the model's options that are no axis, as columns of the design beside the axes: each value
# meets every kind of every axis (None: the option at its default). Attention with one key
# and value head (the query groups' path), a head size apart from d_model / n_heads, untied
# embeddings, BERT's token types, embedding norm, head transform and output bias, no biases
OPTIONS: dict[str, list[Any]] = {
    "model.n_kv_heads": [None, 1],
    "model.head_dim": [None, 12],
    "model.bias": [None, False],
    "model.tie_embeddings": [None, False],
    "model.token_types": [None, 2],
    "model.embed_norm": [None, True],
    "model.head_transform": [None, True],
    "model.output_bias": [None, True],
}


def row_settings(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The settings of a row {axis key: kind} of the model axes, each kind's merged in the row's
    order, or None where two kinds ask for different kinds of one axis (kv=latent takes rope: no
    row with ALiBi). A key no axis owns (a mixture's sizes, bias) takes the later kind's value."""
    out: dict[str, Any] = {}
    pinned = MODEL_AXES.keys() | OPTIONS.keys()  # the row's own columns: a kind may not move them
    for key, kind in row.items():
        if kind is None:
            continue  # the axis or option at its default
        settings = MODEL_AXES[key].settings(kind) if key in MODEL_AXES else {key: kind}
        for k, v in settings.items():
            if k in pinned and out.setdefault(k, v) != v:
                return None
            out[k] = v
    return out


def row_config(row: Mapping[str, Any]) -> tuple[ModelConfig | None, str | None]:
    """(the row's tiny ModelConfig, None), or (None, why not: the one-line refusal, or the
    settings' clash)."""
    settings = row_settings(row)
    if settings is None:
        return None, "clash"
    try:
        return ModelConfig(**model_kwargs(settings)), None
    except ConfigError as refused:
        return None, str(refused)


# the design's columns: every model axis's kinds, then the options' values
COLUMNS: dict[str, list[Any]] = {**{key: list(a.kinds) for key, a in MODEL_AXES.items()}, **OPTIONS}


def row_id(row: Mapping[str, Any]) -> str:
    """A row's test id: its values joined by "-", "default" for a column left at its default."""
    return "-".join("default" if v is None else str(getattr(v, "value", v)) for v in row.values())


def design() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows, refused pairs) of one pairwise design over every model axis and option at once
    (tests/covering.py's `joint`): every pair of values of two columns is built together in some
    row, unless the pair alone, every other column at its default, is refused or clashes."""
    return joint(COLUMNS, lambda row: row_config(row)[0] is not None)


ROWS, REFUSED = design()


def forward_inputs(family: Family, T: int, vocab: int) -> dict[str, torch.Tensor]:
    """A forward's arguments for `family`: T tokens, and T target tokens with an encoder."""
    ids = torch.randint(0, vocab, (1, T))  # (B, T)
    if FAMILY_FACTS[family].cross_attention:
        return {"input_ids": ids, "decoder_input_ids": ids.clone()}
    return {"input_ids": ids}


def _cpu_sdpa_flops(query, key, value, *args, out_shape=None, **kwargs) -> int:
    """SDPA's CPU kernel, counted as torch counts its CUDA kernels (torch's table leaves it out)."""
    return sdpa_flop_count(query, key, value)


def flop_counter() -> FlopCounterMode:
    """torch's FlopCounterMode, counting SDPA's CPU kernel too."""
    cpu_sdpa = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    return FlopCounterMode(display=False, custom_mapping={cpu_sdpa: _cpu_sdpa_flops})


__all__ = [
    "flop_counter",
    "AXES",
    "MODEL_PAIRS",
    "PAIRS",
    "COLUMNS",
    "MODEL_AXES",
    "OPTIONS",
    "REFUSED",
    "ROWS",
    "row_config",
    "row_id",
    "row_settings",
    "forward_inputs",
    "model_kwargs",
    "pair_id",
]
