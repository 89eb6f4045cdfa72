"""Forward FLOPs per token of a model config, from the config alone (no torch, no model built):
the matrix multiplies of every attention sub-layer's projections, its scores and weighted values
over the context, the multiplies a position scheme adds (Shaw's offsets), every feed-forward unit (its row of `zoo.config.facts.ffn.FFN_FACTS`: a sparse
kind counts the units a token passes through, not the parameters it holds), BERT's head
transform and the output projection. Shape names: D = d_model, H = n_heads, Hkv = n_kv_heads,
Dh = head_dim, V = vocab_size, S = the context.

A multiply-add is 2 FLOPs. Elementwise work (norms, activations, softmax, the additions and
rotations of position schemes) is left out, as Kaplan et al. 2020 do; `tests/contract/test_axes.py` checks the
count against torch's FlopCounterMode on a forward of every axis kind.
"""

from __future__ import annotations

from zoo.config.facts.attention import ATTENTION_FACTS, AttentionKind, keys_attended, layer_mixers, stack_windows
from zoo.config.facts.ffn import FFNKind, ffn_flops, layer_kinds
from zoo.config.facts.heads import heads_flops
from zoo.config.facts.kv import KV_FACTS
from zoo.config.facts.positions import POSITION_FACTS
from zoo.config.facts.residuals import residual_flops
from zoo.config.schema.model import ModelConfig
from zoo.config.schema.params import stack_layers


def attention_projection_flops(cfg: ModelConfig) -> int:
    """W_q (D × H·Dh), W_k and W_v (D × Hkv·Dh each), W_o (H·Dh × D) for one token (a
    cross-attention's W_k, W_v run on the source token, counted with it); and what a sink (its
    zero key column) and an output gate (W_g) add, from their rows (`zoo.config.facts.heads`)."""
    D, q, kv = cfg.d_model, cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    return 2 * (D * (q + 2 * kv) + q * D) + heads_flops(cfg)


def attention_score_flops(cfg: ModelConfig, seq_len: int) -> int:
    """q·kᵀ and weights·v of one query over S = seq_len keys: 2·S·H·Dh each (causal masking is
    not discounted)."""
    return 4 * seq_len * cfg.n_heads * cfg.head_dim


def self_attention_flops(cfg: ModelConfig, keys: int) -> int:
    """One self-attention of a query over `keys` keys, from its row of
    `zoo.config.facts.kv.KV_FACTS`: the projections (the per-head ones of
    `attention_projection_flops` where the row has none of its own) and the scores."""
    facts = KV_FACTS[cfg.kv]
    projections = attention_projection_flops(cfg) if facts.flops is None else facts.flops(cfg)
    return projections + facts.scores(cfg, keys)


def block_flops(
    cfg: ModelConfig,
    seq_len: int,
    *,
    cross: bool,
    window: int | None = None,
    ffn: FFNKind | None = None,
    mixer: AttentionKind | None = None,
) -> int:
    """One block: self-attention (and the multiplies its position scheme adds, from its row of
    `POSITION_FACTS`), cross-attention in a decoder of an encoder-decoder, and the
    feed-forward unit (of kind `ffn`, default model.ffn). Self-attention is its `model.kv` row's
    (`self_attention_flops`). A sliding layer's (`window`) self-attention scores cover min(S, window)
    keys (`zoo.config.facts.attention.keys_attended`); cross-attention covers the context. A
    recurrent `mixer` (Gated DeltaNet) counts its row's `flops` in self-attention's place, and no
    position scheme's (it has no positions)."""
    recurrent = ATTENTION_FACTS[mixer].flops if mixer is not None else None
    if recurrent is not None:
        return recurrent(cfg, seq_len) + ffn_flops(cfg, ffn) + residual_flops(cfg, cross=cross)
    attention = self_attention_flops(cfg, keys_attended(window, seq_len))
    if cross:
        attention += attention_projection_flops(cfg) + attention_score_flops(cfg, seq_len)
    residual = residual_flops(cfg, cross=cross)  # hyper-connections' width and dynamic weights
    return attention + POSITION_FACTS[cfg.position.kind].flops(cfg) + ffn_flops(cfg, ffn) + residual


def head_flops(cfg: ModelConfig, *, output_head: bool = True) -> int:
    """The output head: BERT's dense D × D transform (model.head_transform) and the projection
    to V logits (tied or not); none where a task removed the head (`output_head=False`)."""
    if not output_head:
        return 0
    return 2 * cfg.d_model * cfg.d_model * int(cfg.head_transform) + 2 * cfg.d_model * cfg.vocab_size


def flops_per_token(cfg: ModelConfig, seq_len: int, *, output_head: bool = True) -> int:
    """Forward FLOPs for one token at context `seq_len`: every stack's blocks and the output
    head. For an encoder-decoder it is one source token plus one target token, both at seq_len."""
    stacks = sum(
        block_flops(cfg, seq_len, cross=cross, window=window, ffn=kind, mixer=mixer)
        for n_layers, cross in stack_layers(cfg)
        for window, kind, mixer in zip(
            stack_windows(cfg, n_layers), layer_kinds(cfg, n_layers), layer_mixers(cfg, n_layers)
        )
    )
    return stacks + head_flops(cfg, output_head=output_head)


# -- multi-token prediction (task.mtp_depth; zoo.config.facts.mtp) ------------------------------
def mtp_module_flops(cfg: ModelConfig, seq_len: int) -> int:
    """One multi-token prediction module's forward FLOPs for one token at context `seq_len`: M_k
    (2D -> D), its block (full causal attention, the feed-forward kind of the stack's last layer)
    and the shared output head."""
    kind = layer_kinds(cfg, cfg.n_layers)[-1]
    D = cfg.d_model
    return 2 * (2 * D * D) + block_flops(cfg, seq_len, cross=False, ffn=kind) + head_flops(cfg)


def mtp_flops(cfg: ModelConfig, depth: int, seq_len: int) -> int:
    """Forward FLOPs task.mtp_depth=`depth` adds per training token at context `seq_len` (module k
    runs on T - k positions of a window; counted here at T for each)."""
    return depth * mtp_module_flops(cfg, seq_len)
