"""What a stack adds to its layers' values: the value residual (`model.value_residual`: every
layer after the first mixes its values with the first layer's, ResFormer) and value embeddings
(`model.value_embeds`: tables of the input tokens added to the values of the first and last
layers, modded-nanogpt). Rows: `zoo.config.facts.residuals`.

A stack holds one `ValueStream`; each forward asks it for one hook per layer (`hooks`), which the
layer's self-attention applies to its values (B, Hkv, T, Dh) of the new tokens right after the
projection, before the position scheme and the KV cache: the cache keeps the mixed values, and
v_1 and the tables' lookups are needed for the tokens of this forward only, so cached decoding
needs nothing kept beyond the usual keys and values."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import nn

from zoo.config.facts.residuals import VALUE_EMBED_FACTS, VALUE_RESIDUAL_FACTS, ValueResidual, value_embed_layers
from zoo.config.schema.model import ModelConfig

ValueHook = Callable[[torch.Tensor], torch.Tensor]  # values (B, Hkv, T, Dh) -> (B, Hkv, T, Dh)


class ValueStream(nn.Module):
    """The value residual's weights and the value-embedding tables of one stack of `n_layers`."""

    def __init__(self, cfg: ModelConfig, n_layers: int) -> None:
        super().__init__()
        self.residual = cfg.value_residual
        self.n_kv_heads, self.head_dim = cfg.n_kv_heads, cfg.head_dim
        self.starts = {**VALUE_RESIDUAL_FACTS[cfg.value_residual].starts, **VALUE_EMBED_FACTS.starts}
        if cfg.value_residual == ValueResidual.learned:
            self.residual_lambdas = nn.Parameter(torch.empty(n_layers - 1))  # (L - 1,) λ of layers 1..L-1
        self.table_of = value_embed_layers(n_layers, cfg.value_embeds)
        self.tables = nn.ModuleList(
            nn.Embedding(cfg.vocab_size, cfg.n_kv_heads * cfg.head_dim) for _ in range(cfg.value_embeds)
        )
        if cfg.value_embeds:
            self.embed_lambdas = nn.Parameter(torch.empty(2 * cfg.value_embeds, 2))  # (2k, 2) (λ_0, λ_1) per layer
        # the layers with a table, in order: row r of embed_lambdas is the r-th of them
        self._row = {layer: r for r, layer in enumerate(i for i, t in enumerate(self.table_of) if t is not None)}

    @staticmethod
    def wanted(cfg: ModelConfig) -> bool:
        """Whether `cfg` asks for either option (a stack holds no `ValueStream` otherwise)."""
        return cfg.value_residual != ValueResidual.none or cfg.value_embeds > 0

    @property
    def needs_tokens(self) -> bool:
        return len(self.tables) > 0

    def hooks(self, token_ids: torch.Tensor | None) -> list[ValueHook]:
        """One hook per layer for a forward over `token_ids` (B, T): layer 0's records v_1 (after
        its own table), the later ones mix it in; the tables are looked up once each."""
        if self.needs_tokens and token_ids is None:
            raise ValueError("model.value_embeds looks up the input tokens: pass token_ids to the stack")
        looked_up = [table(token_ids) for table in self.tables]  # k × (B, T, Hkv·Dh)
        first: list[torch.Tensor] = []  # v_1 of this forward, once layer 0 has run

        def hook(layer: int, v: torch.Tensor) -> torch.Tensor:
            if layer > 0 and self.residual == ValueResidual.fixed:
                v = 0.5 * v + 0.5 * first[0]
            elif layer > 0 and self.residual == ValueResidual.learned:
                lam = self.residual_lambdas[layer - 1]
                v = (1 - lam) * v + lam * first[0]
            table = self.table_of[layer]
            if table is not None:
                B, _, T, _ = v.shape
                ve = looked_up[table].view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, Hkv, T, Dh)
                lam0, lam1 = self.embed_lambdas[self._row[layer]]
                v = lam0 * v + lam1 * ve.to(v.dtype)
            if layer == 0:
                first[:] = [v]
            return v

        return [partial(hook, i) for i in range(len(self.table_of))]
