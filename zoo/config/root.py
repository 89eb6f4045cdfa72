"""The root schema composed by `zoo-train` and `zoo.compose`."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from zoo.config.model import ModelConfig


@dataclass(kw_only=True)
class ZooConfig:
    model: ModelConfig = MISSING
    seed: int = field(default=0, metadata={"help": "global seed for weights, data order, dropout"})
