"""Encoder-only model (BERT: Devlin et al. 2019): a bidirectional stack; the output projection
gives per-token logits for masked-LM training, `hidden_states` feed a classifier."""

from __future__ import annotations

import torch

from zoo.config.schema.model import ModelConfig
from zoo.models.base import ModelOutput, ZooModel, make_position_ids
from zoo.nn.block import Stack


class EncoderOnly(ZooModel):
    def __init__(self, cfg: ModelConfig, init_seed: int | None = None) -> None:
        super().__init__(cfg, init_seed)
        self.encoder = Stack(cfg, n_layers=cfg.n_layers, causal=False, cross=False)
        self._init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        return_logits: bool = True,
        token_type_ids: torch.Tensor | None = None,
    ) -> ModelOutput:
        """input_ids (B, T); attention_mask (B, T), 1 = token, 0 = pad; token_type_ids (B, T)
        (segments, where model.token_types > 0; default type 0). -> logits (B, T, V)."""
        B, T = input_ids.shape
        if position_ids is None:
            position_ids = make_position_ids(attention_mask, T, None, input_ids.device)
        h = self.encoder(
            self.embed_tokens(input_ids, token_type_ids),
            positions=position_ids,
            key_padding=attention_mask,
            token_ids=input_ids,  # model.value_embeds
        )  # (B, T, D)
        return ModelOutput(logits=self.logits(h) if return_logits else None, hidden_states=h)
