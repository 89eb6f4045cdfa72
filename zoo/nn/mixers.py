"""The modules of the recurrent rows of the attention axis (`zoo.config.facts.attention`): the
kind -> module map the stack builds a recurrent layer from. A module takes the model config and
runs forward(x (B, T, D), state: RecurrentState | None, padding (B, T) | None, document_ids
(B, T) | None) -> (B, T, D), updating `state` (`zoo.nn.recurrent_state`) when decoding.
docs/extending.md ("adding a recurrent mixer") says how a kind joins."""

from __future__ import annotations

from torch import nn

from zoo.config.facts.attention import AttentionKind
from zoo.config.schema.model import ModelConfig
from zoo.nn.gated_deltanet import GatedDeltaNet
from zoo.nn.mamba2 import Mamba2

MIXERS: dict[AttentionKind, type[nn.Module]] = {
    AttentionKind.gated_deltanet: GatedDeltaNet,
    AttentionKind.mamba2: Mamba2,
}


def build_mixer(cfg: ModelConfig, kind: AttentionKind) -> nn.Module:
    """The module of the recurrent kind `kind`, built from `cfg`."""
    return MIXERS[kind](cfg)
