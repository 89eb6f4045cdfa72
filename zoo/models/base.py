"""What every model family shares: token embedding, output projection (optionally tied),
weight initialisation, and the output object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from zoo.config.model import ModelConfig
from zoo.nn.cache import Cache
from zoo.nn.embedding import TokenEmbedding


@dataclass
class ModelOutput:
    """logits (B, T, V) (None when a caller asked for hidden states only); hidden_states
    (B, T, D) after the final norm; cache for incremental decoding when asked for;
    encoder_hidden_states (B, S, D) for encoder-decoder models."""

    logits: Optional[torch.Tensor]
    hidden_states: torch.Tensor
    cache: Optional[Cache] = None
    encoder_hidden_states: Optional[torch.Tensor] = None


def make_position_ids(
    attention_mask: Optional[torch.Tensor], length: int, past: int, device: torch.device
) -> torch.Tensor:
    """Positions of the `length` newest tokens: (1, T) counting from `past`, or, given a
    (B, past + T) mask, (B, T) counting only real tokens, so left-padded rows start at 0."""
    if attention_mask is None:
        return torch.arange(past, past + length, device=device)[None]  # (1, T)
    counted = attention_mask.long().cumsum(-1) - 1  # (B, S)
    return counted.clamp(min=0)[:, -length:]  # (B, T)


class ZooModel(nn.Module):
    """Base of the three families. Subclasses build their stacks, then call `_init_weights`."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embed = TokenEmbedding(cfg.vocab_size, cfg.d_model, scale=cfg.scale_embeddings)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)

    def _init_weights(self) -> None:
        """Normal(0, init_std) for every matrix and embedding table, zero biases, unit norms;
        then tie the output projection to the token embedding if asked."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=self.config.init_std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        if self.config.tie_embeddings:
            self.lm_head.weight = self.embed.weight

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, V)."""
        if self.lm_head is None:
            raise ValueError("this model's output projection was removed (a classifier replaced it)")
        return self.lm_head(hidden)

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device
