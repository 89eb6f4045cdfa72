"""Multi-token prediction modules (DeepSeek-V3 §2.2, `task.mtp_depth`): D sequential modules
beside a decoder-only model, sharing its token embedding and output head.

Module k (k = 1..D) at position i reads the previous depth's representation h^{k-1}_i (h^0 the
model's hidden state as its output head reads it, after the final norm) and the embedding of
the token k places ahead, t_{i+k}; it returns h^k_i, from which the shared head predicts
t_{i+k+1}:

    h'^k_i = M_k [norm_h(h^{k-1}_i); norm_e(Emb(t_{i+k}))]      M_k: 2D -> D
    h^k = final_norm(TRM_k(h'^k))                                one causal decoder block
    logits^k_i = OutHead(h^k_i)

Over a window of T inputs module k runs on the T - k positions whose input token t_{i+k} is in
the window, and its targets are the labels shifted by k. The row of facts, parameter and FLOP
counts are `zoo.config.facts.mtp`; the self-speculative decoding that drafts with the modules is
`zoo.models.speculative`."""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from zoo.config.facts.ffn import layer_kinds
from zoo.config.facts.placements import PLACEMENT_FACTS
from zoo.config.schema.model import ModelConfig
from zoo.config.schema.task import OutputLoss
from zoo.models.base import TokenLoss, ZooModel
from zoo.models.init import ZEROS, Init, initialise, normal
from zoo.models.parametrization import hidden_init_std
from zoo.nn.block import Block, Stack
from zoo.nn.cache import LayerCache
from zoo.nn.mask import attention_mask
from zoo.nn.norm import build_norm
from zoo.nn.position.base import PositionScheme


class MTPModule(nn.Module):
    """One depth: (B, T, D) previous representation and (B, T, D) embeddings of the tokens k
    ahead -> (B, T, D) this depth's representation."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        D = cfg.d_model
        self.norm_h = build_norm(cfg.norm_type, D, cfg.norm_eps, cfg.bias)
        self.norm_e = build_norm(cfg.norm_type, D, cfg.norm_eps, cfg.bias)
        self.proj = nn.Linear(2 * D, D, bias=cfg.bias)  # M_k
        self.block = Block(cfg, cross=False, ffn=layer_kinds(cfg, cfg.n_layers)[-1])
        final = PLACEMENT_FACTS[cfg.norm].final_norm  # every placement but post, as the stack's
        self.final_norm = build_norm(cfg.norm_type, D, cfg.norm_eps, cfg.bias) if final else nn.Identity()

    def forward(
        self,
        hidden: torch.Tensor,
        embedded: torch.Tensor,
        *,
        positions: torch.Tensor,
        position: PositionScheme,
        cache: LayerCache | None = None,
    ) -> torch.Tensor:
        """hidden, embedded (B, T, D); positions (1, T); `cache` holds this module's keys and
        values of earlier positions (decoding) -> (B, T, D)."""
        T = hidden.shape[1]
        x = self.proj(torch.cat([self.norm_h(hidden), self.norm_e(embedded)], dim=-1))  # (B, T, 2D) -> (B, T, D)
        past = cache.self_attn.length if cache is not None else 0
        if past == 0:
            mask, causal = None, True
        elif T == 1:
            mask, causal = None, False  # one new query sees every cached key
        else:
            mask = attention_mask(q_len=T, k_len=past + T, causal=True, key_padding=None, device=x.device)
            causal = False  # (1, 1, T, past + T)
        x = self.block(x, positions=positions, position=position, mask=mask, causal=causal, cache=cache)
        return self.final_norm(x)


class MultiTokenPrediction(nn.Module):
    """`depth` sequential modules (`layers`); the token table, position scheme and output head
    are the model's, passed to each call."""

    def __init__(self, cfg: ModelConfig, depth: int) -> None:
        super().__init__()
        if depth < 1:
            raise ValueError(f"multi-token prediction needs a depth >= 1, got {depth}")
        self.config = cfg
        self.layers = nn.ModuleList(MTPModule(cfg) for _ in range(depth))

    @property
    def depth(self) -> int:
        return len(self.layers)

    @staticmethod
    def position(model: ZooModel) -> PositionScheme:
        """The position scheme the modules attend with: the main stack's last layer's."""
        stack = cast(Stack, model.decoder)
        return stack.position_for(len(stack.layers) - 1)

    def forward(self, model: ZooModel, hidden: torch.Tensor, input_ids: torch.Tensor) -> list[torch.Tensor]:
        """hidden (B, T, D) the model's final states over input_ids (B, T) -> [h^1 (B, T-1, D),
        ..., h^D (B, T-D, D)]: module k at positions 0..T-k-1, reading the tokens k ahead."""
        T = input_ids.shape[1]
        position = self.position(model)
        out, previous = [], hidden
        for k, layer in enumerate(self.layers, start=1):
            n = T - k
            positions = torch.arange(n, device=input_ids.device)[None]  # (1, T-k)
            embedded = model.embed_tokens(input_ids[:, k:])  # (B, T-k, D): Emb(t_{i+k})
            previous = layer(previous[:, :n], embedded, positions=positions, position=position)  # (B, T-k, D)
            out.append(previous)
        return out

    def losses(
        self,
        model: ZooModel,
        hidden: torch.Tensor,
        input_ids: torch.Tensor,
        labels: torch.Tensor,
        *,
        chunk: int = 1024,
        label_smoothing: float = 0.0,
        output_loss: OutputLoss = OutputLoss.chunked,
    ) -> list[TokenLoss]:
        """Each depth's cross-entropy through the shared head: module k's states at positions
        0..T-k-1 against labels (B, T) shifted by k (the token k + 1 ahead of each input)."""
        states = self(model, hidden, input_ids)
        return [
            model.token_losses(
                h.reshape(-1, h.shape[-1]),
                labels[:, k:].reshape(-1),
                chunk=chunk,
                label_smoothing=label_smoothing,
                output_loss=output_loss,
            )  # rows (B·(T-k), D)
            for k, h in enumerate(states, start=1)
        ]

    def init_rules(self, prefix: str) -> dict[str, Init]:
        """{parameter name under `prefix`: how it starts}, as the model starts its own: linear
        weights Normal(0, init_std), biases zero, a module of zoo's own as its row declares."""
        cfg, rules = self.config, {}
        for name, module in self.named_modules(prefix=prefix):
            if isinstance(module, nn.Linear):
                rules[f"{name}.weight"] = normal(hidden_init_std(cfg))
                if module.bias is not None:
                    rules[f"{name}.bias"] = ZEROS
            own = dict(module.named_parameters(recurse=False))
            for key, start in getattr(module, "starts", {}).items():
                if key in own:
                    rules[f"{name}.{key}"] = start.resolved(cfg.init_std)
        return rules

    def initialise(self, prefix: str, seed: int) -> None:
        """Give every parameter its first value from `seed` and its name under `prefix` (the
        model's seed: a run's modules follow from its init seed alone)."""
        initialise(self.named_parameters(prefix=prefix), self.init_rules(prefix), seed)  # KeyError: a rule missing
