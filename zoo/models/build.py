"""`build_model`: a validated config in, a plain `torch.nn.Module` out."""

from __future__ import annotations

from typing import Any

import torch

from zoo.config.schema.convert import as_model_config
from zoo.config.schema.model import Family
from zoo.models.base import ZooModel
from zoo.models.decoder_only import DecoderOnly
from zoo.models.encoder_decoder import EncoderDecoder
from zoo.models.encoder_only import EncoderOnly
from zoo.models.init import draw_seed

FAMILIES: dict[Family, type[ZooModel]] = {
    Family.encoder_only: EncoderOnly,
    Family.decoder_only: DecoderOnly,
    Family.encoder_decoder: EncoderDecoder,
}


def build_model(cfg: Any, init_seed: int | None = None) -> ZooModel:
    """Build the model described by `cfg` (a Hydra DictConfig such as `zoo.compose(...).model`,
    a plain dict, or a `ModelConfig`). The config is validated first, so an impossible
    combination raises `ConfigError` before any weights are allocated.

    The weights follow from `init_seed` alone (`zoo.models.init`); without one, it is drawn
    from torch's global generator, the only draw building makes from it (so what a run draws
    afterwards, dropout or data order, is the same whether the model was built whole or on the
    meta device)."""
    model_cfg = as_model_config(cfg)
    seed = draw_seed() if init_seed is None else init_seed
    with torch.random.fork_rng(devices=[]):  # the modules' own default initialisation draws: undone
        return FAMILIES[model_cfg.family](model_cfg, init_seed=seed)
