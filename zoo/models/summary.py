"""Parameter counts and forward FLOPs per token of a built model."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from torch import nn

from zoo.config.facts.attention import keys_attended
from zoo.config.facts.positions import POSITION_FACTS
from zoo.models.base import ZooModel
from zoo.nn.attention import Attention
from zoo.nn.block import Stack
from zoo.nn.position.base import PositionScheme


@dataclass(frozen=True)
class ModelSummary:
    """Counts for comparing arms of an ablation.

    - `total_params`: unique parameters (a tied output projection counts once).
    - `embedding_params`: token table, an untied output projection, the token-type table, the
      output bias and position parameters whose row of `POSITION_FACTS` counts them as embeddings
      (learned position tables).
    - `non_embedding_params`: the rest (Kaplan et al. 2020 use this to compare model sizes).
    - `flops_per_token`: forward FLOPs for one token at context `seq_len`: 2 per weight of every
      matrix multiply (the output projection included, tied or not) plus 4·S·H·Dh per attention
      layer for q·kᵀ and weights·v over S keys (S = seq_len; causal masking is not discounted;
      a sliding layer's S is min(seq_len, model.window), `keys_attended`).
      For an encoder-decoder it is one source token plus one target token, both at seq_len.
    """

    total_params: int
    embedding_params: int
    non_embedding_params: int
    flops_per_token: int
    seq_len: int

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"parameters {self.total_params:,} (non-embedding {self.non_embedding_params:,}), "
            f"forward FLOPs/token {self.flops_per_token:,} at context {self.seq_len}"
        )


def summarize(model: ZooModel, seq_len: int | None = None) -> ModelSummary:
    cfg = model.config
    seq_len = seq_len or cfg.max_seq_len
    unique = {id(p): p for p in model.parameters()}
    total = sum(p.numel() for p in unique.values())

    embedding = {id(model.embed.weight): model.embed.weight}
    if model.lm_head is not None and model.lm_head.weight is not model.embed.weight:
        embedding[id(model.lm_head.weight)] = model.lm_head.weight
    if model.token_type_embed is not None:
        embedding[id(model.token_type_embed.weight)] = model.token_type_embed.weight
    if model.output_bias is not None:
        embedding[id(model.output_bias)] = model.output_bias
    if POSITION_FACTS[cfg.position.kind].embedding:  # a learned table of positions
        for module in model.modules():
            if isinstance(module, PositionScheme):
                embedding.update((id(p), p) for p in module.parameters())
    n_embedding = sum(p.numel() for p in embedding.values())

    matmul_weights = sum(
        m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear)
    )  # includes lm_head once, tied or not
    keys = {id(layer.self_attn): keys_attended(window, seq_len)
            for stack in model.modules() if isinstance(stack, Stack)
            for layer, window in zip(stack.layers, stack.windows)}  # sliding layers see their window
    attention_flops = sum(4 * keys.get(id(m), seq_len) * cfg.n_heads * cfg.head_dim
                          for m in model.modules() if isinstance(m, Attention))
    flops = 2 * matmul_weights + attention_flops
    return ModelSummary(
        total_params=total,
        embedding_params=n_embedding,
        non_embedding_params=total - n_embedding,
        flops_per_token=flops,
        seq_len=seq_len,
    )
