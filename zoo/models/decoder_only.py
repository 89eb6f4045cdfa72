"""Decoder-only language model (GPT: Radford et al. 2018/2019; Llama: Touvron et al. 2023):
a causal stack over token embeddings, predicting the next token at every position."""

from __future__ import annotations

import torch

from zoo.config.schema.model import ModelConfig
from zoo.models.base import ModelOutput, ZooModel, make_position_ids
from zoo.nn.block import Stack
from zoo.nn.cache import Cache
from zoo.nn.documents import positions_in_documents


class DecoderOnly(ZooModel):
    def __init__(self, cfg: ModelConfig, init_seed: int | None = None) -> None:
        super().__init__(cfg, init_seed)
        self.decoder = Stack(cfg, n_layers=cfg.n_layers, causal=True, cross=False)
        self._init_weights()

    def new_cache(self, capacity: int | None = None) -> Cache:
        """An empty KV cache; `capacity`: a static one of that many positions."""
        return Cache.empty(len(self.decoder.layers), capacity, self.decoder.windows, self.decoder.recurrent)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        cache: Cache | None = None,
        use_cache: bool = False,
        return_logits: bool = True,
        token_type_ids: torch.Tensor | None = None,
        document_ids: torch.Tensor | None = None,
    ) -> ModelOutput:
        """input_ids (B, T); attention_mask (B, past + T), 1 = token, 0 = pad (left padding
        is fine); cache from a previous call continues decoding; token_type_ids (B, T) where
        model.token_types > 0 (default type 0); document_ids (B, T): packed documents
        (data.document_mask), attended apart, positions restarting at each. -> logits (B, T, V)."""
        B, T = input_ids.shape
        if use_cache and cache is None:
            cache = self.new_cache()
        if position_ids is None and document_ids is not None:
            position_ids = positions_in_documents(document_ids)  # (B, T)
        elif position_ids is None:
            position_ids = make_position_ids(attention_mask, T, cache, input_ids.device)
        h = self.decoder(
            self.embed_tokens(input_ids, token_type_ids),
            positions=position_ids,
            key_padding=attention_mask,
            cache=cache,
            document_ids=document_ids,
            token_ids=input_ids,  # model.value_embeds
        )  # (B, T, D)
        return ModelOutput(logits=self.logits(h) if return_logits else None, hidden_states=h, cache=cache)
