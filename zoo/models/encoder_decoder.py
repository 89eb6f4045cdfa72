"""Encoder-decoder model (Vaswani et al. 2017; T5: Raffel et al. 2020): a bidirectional
encoder over the source and a causal decoder that cross-attends to it. Source and target share
one vocabulary and one embedding table."""

from __future__ import annotations

import torch

from zoo.config.schema.model import ModelConfig
from zoo.models.base import ModelOutput, ZooModel, make_position_ids
from zoo.nn.block import Stack
from zoo.nn.cache import Cache


class EncoderDecoder(ZooModel):
    def __init__(self, cfg: ModelConfig, init_seed: int | None = None) -> None:
        super().__init__(cfg, init_seed)
        self.encoder = Stack(cfg, n_layers=cfg.n_layers, causal=False, cross=False)
        self.decoder = Stack(cfg, n_layers=cfg.decoder_layers, causal=True, cross=True)
        self._init_weights()

    def new_cache(self, capacity: int | None = None) -> Cache:
        """An empty KV cache; `capacity`: a static one of that many positions."""
        return Cache.empty(len(self.decoder.layers), capacity, self.decoder.windows)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids (B, S) -> encoder states (B, S, D)."""
        positions = make_position_ids(attention_mask, input_ids.shape[1], None, input_ids.device)
        return self.encoder(
            self.embed_tokens(input_ids), positions=positions, key_padding=attention_mask, token_ids=input_ids
        )

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        cache: Cache | None = None,
        use_cache: bool = False,
        return_logits: bool = True,
    ) -> ModelOutput:
        """input_ids (B, S) source, attention_mask (B, S); decoder_input_ids (B, T) target so far
        (shifted right); decoder_attention_mask (B, past + T). Pass `encoder_hidden_states`
        (B, S, D) to skip re-encoding. -> logits (B, T, V)."""
        if decoder_input_ids is None:
            raise ValueError("an encoder-decoder model needs decoder_input_ids (the shifted target)")
        if encoder_hidden_states is None:
            if input_ids is None:
                raise ValueError("an encoder-decoder model needs input_ids or encoder_hidden_states")
            encoder_hidden_states = self.encode(input_ids, attention_mask)
        if use_cache and cache is None:
            cache = self.new_cache()
        B, T = decoder_input_ids.shape
        positions = make_position_ids(decoder_attention_mask, T, cache, decoder_input_ids.device)
        h = self.decoder(
            self.embed_tokens(decoder_input_ids),
            positions=positions,
            key_padding=decoder_attention_mask,
            memory=encoder_hidden_states,
            memory_padding=attention_mask,
            cache=cache,
            token_ids=decoder_input_ids,  # model.value_embeds
        )  # (B, T, D)
        return ModelOutput(
            logits=self.logits(h) if return_logits else None,
            hidden_states=h,
            cache=cache,
            encoder_hidden_states=encoder_hidden_states,
        )
