"""The (axis, kind) pairs of `zoo.config.facts.axes.AXES` and tiny configs that select them: a
kind registered there is covered by every contract test here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from tests.conftest import tiny
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


def families_for(axis: Axis, kind) -> list[str]:
    """The families a kind is built with: every one, or for the family axis its own."""
    if axis.key == "model.family":
        return [kind.value]
    return [f.value for f in Family]


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


__all__ = ["flop_counter", "AXES", "MODEL_PAIRS", "PAIRS", "families_for", "forward_inputs", "model_kwargs", "pair_id"]
