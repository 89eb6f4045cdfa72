"""Typed configuration schemas (no torch import)."""

from zoo.config.errors import ConfigError
from zoo.config.schema.convert import as_model_config
from zoo.config.schema.model import (
    Activation,
    Family,
    FFNKind,
    ModelConfig,
    NormPlacement,
    NormType,
    PositionConfig,
    PositionKind,
)

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
