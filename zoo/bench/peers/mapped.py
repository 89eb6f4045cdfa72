"""What a peer maps of zoo's ablation axes, and the refusal of every kind it does not map.

A peer lists, per model-level axis of `zoo.config.facts.axes.AXES` (its config key), the kinds
it has an equivalent for; a workload whose model has any other kind is refused with
PeerUnavailable naming the key and the kind, never run as something else (a norm it does not
know is not LayerNorm). An axis the peer does not list is mapped at its default only: a kind
added to zoo later is refused by every peer until the peer maps it."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from zoo.bench.peers.unavailable import PeerUnavailable
from zoo.config.facts.axes import AXES
from zoo.config.schema.model import ModelConfig


def setting(cfg: ModelConfig, key: str) -> Any:
    """The value of dotted model key `key` ("model.position.kind") in `cfg`."""
    value: Any = cfg
    for part in key.split(".")[1:]:
        value = getattr(value, part)
    return value


def refuse_unmapped(cfg: ModelConfig, mapped: Mapping[str, Collection], peer: str) -> None:
    """PeerUnavailable naming every model-level axis whose kind in `cfg` the peer does not map
    (`mapped`: config key -> the kinds it maps; an axis not listed: its default kind only), so
    that a kind that comes with another (an expert kind with model.ffn=moe) is named too."""
    default = ModelConfig()
    unmapped = []
    for axis in AXES:
        if not axis.model_level:
            continue
        kind = setting(cfg, axis.key)
        if kind not in mapped.get(axis.key, (setting(default, axis.key),)):
            unmapped.append(f"{axis.key}={kind.value}")
    if unmapped:
        raise PeerUnavailable(f"{peer} has no equivalent of {', '.join(unmapped)}")
