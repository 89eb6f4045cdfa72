"""`build_model`: a validated config in, a plain `torch.nn.Module` out."""

from __future__ import annotations

from typing import Any

from zoo.config.convert import as_model_config
from zoo.config.model import Family
from zoo.models.base import ZooModel
from zoo.models.decoder_only import DecoderOnly
from zoo.models.encoder_decoder import EncoderDecoder
from zoo.models.encoder_only import EncoderOnly

FAMILIES: dict[Family, type[ZooModel]] = {
    Family.encoder_only: EncoderOnly,
    Family.decoder_only: DecoderOnly,
    Family.encoder_decoder: EncoderDecoder,
}


def build_model(cfg: Any) -> ZooModel:
    """Build the model described by `cfg` (a Hydra DictConfig such as `zoo.compose(...).model`,
    a plain dict, or a `ModelConfig`). The config is validated first, so an impossible
    combination raises `ConfigError` before any weights are allocated."""
    model_cfg = as_model_config(cfg)
    return FAMILIES[model_cfg.family](model_cfg)
