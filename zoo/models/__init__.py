"""Model assemblies built from a `ModelConfig`: pure torch.nn, no Lightning, no Hydra."""

from zoo.models.base import ModelOutput, ZooModel
from zoo.models.build import FAMILIES, build_model
from zoo.models.decoder_only import DecoderOnly
from zoo.models.encoder_decoder import EncoderDecoder
from zoo.models.encoder_only import EncoderOnly
from zoo.models.summary import ModelSummary, summarize

__all__ = [
    "FAMILIES",
    "DecoderOnly",
    "EncoderDecoder",
    "EncoderOnly",
    "ModelOutput",
    "ModelSummary",
    "ZooModel",
    "build_model",
    "summarize",
]
