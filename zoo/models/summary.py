"""Parameter counts and forward FLOPs per token of a built model."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from zoo.config.facts.positions import POSITION_FACTS
from zoo.config.schema.flops import flops_per_token
from zoo.config.schema.params import active_non_embedding_params, non_embedding_params
from zoo.models.base import ZooModel
from zoo.nn.position.base import PositionScheme
from zoo.nn.values import ValueStream


@dataclass(frozen=True)
class ModelSummary:
    """Counts for comparing arms of an ablation.

    - `total_params`: unique parameters (a tied output projection counts once).
    - `embedding_params`: token table, an untied output projection, the token-type table, the
      output bias and position parameters whose row of `POSITION_FACTS` counts them as embeddings
      (learned position tables).
    - `non_embedding_params`: the rest (Kaplan et al. 2020 use this to compare model sizes).
    - `flops_per_token`: forward FLOPs for one token at context `seq_len`, counted from the rows
      (`zoo.config.schema.flops`): 2 per multiply-add of the attention projections, the
      feed-forward units (as their row counts them) and the output projection (tied or not),
      plus 4·S·H·Dh per attention layer for q·kᵀ and weights·v over S keys (S = seq_len; causal
      masking is not discounted). For an encoder-decoder it is one source token plus one target
      token, both at seq_len. Under model.ffn=moe it counts the active parameters only: the
      router, the top-k and the shared experts of each mixture layer.
    - `active_params`, `active_non_embedding_params`: the parameters one token passes through, in
      all and without the embeddings (a mixture layer: its router, top-k and shared experts
      instead of all its experts); equal to `total_params` and `non_embedding_params` for a
      dense model.
    """

    total_params: int
    embedding_params: int
    non_embedding_params: int
    flops_per_token: int
    seq_len: int
    active_params: int = 0
    active_non_embedding_params: int = 0

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        active = ""
        if self.active_params != self.total_params:
            active = f", active {self.active_params:,} (non-embedding {self.active_non_embedding_params:,})"
        return (
            f"parameters {self.total_params:,} (non-embedding {self.non_embedding_params:,}){active}, "
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
    for module in model.modules():  # value-embedding tables (model.value_embeds)
        if isinstance(module, ValueStream):
            embedding.update((id(p), p) for p in module.tables.parameters())
    n_embedding = sum(p.numel() for p in embedding.values())

    flops = flops_per_token(cfg, seq_len, output_head=model.lm_head is not None)
    inactive = non_embedding_params(cfg) - active_non_embedding_params(cfg)  # experts a token skips
    return ModelSummary(
        total_params=total,
        embedding_params=n_embedding,
        non_embedding_params=total - n_embedding,
        flops_per_token=flops,
        seq_len=seq_len,
        active_params=total - inactive,
        active_non_embedding_params=total - n_embedding - inactive,
    )
