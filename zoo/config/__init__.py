"""Typed configuration schemas (no torch import)."""

from zoo.config.errors import ConfigError
from zoo.config.schema.model import (
    Activation,
    FFNKind,
    Family,
    ModelConfig,
    NormPlacement,
    NormType,
    PositionConfig,
    PositionKind,
)
from zoo.config.schema.convert import as_model_config

__all__ = [
    "Activation",
    "ConfigError",
    "FFNKind",
    "Family",
    "ModelConfig",
    "NormPlacement",
    "NormType",
    "PositionConfig",
    "PositionKind",
    "as_model_config",
]
