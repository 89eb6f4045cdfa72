"""Non-embedding parameter count of a model config, worked out from the config alone (no torch,
no model built), and the d_ff that `model.param_budget` asks for.

The count is what `zoo.summarize(zoo.build_model(cfg)).non_embedding_params` reports: every
parameter except the token table (V·D), an untied output projection (V·D), the token-type table
(token_types·D), the output bias (V) and the position parameters whose row of
`zoo.config.facts.positions.POSITION_FACTS` counts them as embeddings (a learned table,
(max_seq_len + offset)·D per stack). Shape names: D = d_model, H = n_heads, Hkv = n_kv_heads,
Dh = head_dim, F = d_ff.

The count is linear in F, P(F) = A + B·F (only the feed-forward units depend on F), so a budget
gives F directly. A gated unit has three D×F matrices to a plain unit's two, so it gets about
2/3 of the width at the same budget (Shazeer 2020). `tests/models/test_budget.py` checks the
count against built models for every family, position scheme, norm and activation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import fields

from zoo.config.errors import ConfigError
from zoo.config.facts.activations import GATED
from zoo.config.facts.attention import ATTENTION_FACTS, AttentionKind, mixer_counts
from zoo.config.facts.blocks import QK_NORM_FACTS, norms_per_block
from zoo.config.facts.families import FAMILY_FACTS
from zoo.config.facts.ffn import ffn_parameters, layer_kinds
from zoo.config.facts.heads import heads_parameters
from zoo.config.facts.kv import KV_FACTS
from zoo.config.facts.norms import NORM_FACTS, norm_parameters
from zoo.config.facts.placements import PLACEMENT_FACTS
from zoo.config.facts.positions import POSITION_FACTS
from zoo.config.facts.residuals import VALUE_EMBED_FACTS, residual_parameters
from zoo.config.schema.frozen import settle
from zoo.config.schema.model import ModelConfig
from zoo.config.schema.widths import round_up


def norm_params(cfg: ModelConfig) -> int:
    """One norm over D, from its row of `zoo.config.facts.norms.NORM_FACTS` (LayerNorm: γ and,
    with model.bias, β; RMSNorm: γ)."""
    return norm_parameters(cfg)


def qk_norm_params(cfg: ModelConfig) -> int:
    """The QK-norm of one attention: norms of `model.qk_norm_type` (its row of `NORM_FACTS`) at
    the widths of its row of `zoo.config.facts.blocks.QK_NORM_FACTS` (none: 0)."""
    widths = QK_NORM_FACTS[cfg.qk_norm].widths(cfg)
    return sum(NORM_FACTS[cfg.qk_norm_kind].parameters(width, cfg.bias) for width in widths)


def attention_params(cfg: ModelConfig) -> int:
    """One attention sub-layer: W_q (D × H·Dh), W_k and W_v (D × Hkv·Dh each), W_o (H·Dh × D);
    with model.bias, biases H·Dh + 2·Hkv·Dh + D; and its QK-norm (model.qk_norm). Self-attention
    fuses W_q, W_k, W_v into one matrix, cross-attention fuses W_k, W_v only: the same count
    either way. A sink and an output gate add their rows' (`zoo.config.facts.heads`)."""
    D, q, kv = cfg.d_model, cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    weights = D * (q + 2 * kv) + q * D
    biases = (q + 2 * kv + D) if cfg.bias else 0
    return weights + biases + qk_norm_params(cfg) + heads_parameters(cfg)


def self_attention_params(cfg: ModelConfig) -> int:
    """One self-attention sub-layer: its row of `zoo.config.facts.kv.KV_FACTS` (model.kv=latent:
    the latent projections and norms), or the per-head count of `attention_params`."""
    own = KV_FACTS[cfg.kv].parameters
    return attention_params(cfg) if own is None else own(cfg)


def mixer_params(cfg: ModelConfig, kind: AttentionKind) -> int:
    """One layer's mixer of `kind`: a recurrent kind's row counts its own (`parameters`), every
    other kind is self-attention (`self_attention_params`)."""
    count = ATTENTION_FACTS[kind].parameters
    return count(cfg) if count is not None else self_attention_params(cfg)


def feedforward_params(cfg: ModelConfig, kind=None, *, active: bool = False) -> tuple[int, int]:
    """One feed-forward unit of `kind` (default model.ffn) as (A, B) with count A + B·F, from its
    row of `zoo.config.facts.ffn.FFN_FACTS` (linear in F): A at F = 0, B the step to F = 1; all
    its parameters, or with `active` those one token passes through. Dense: B = 2·D (+ 1) plain,
    3·D (+ 2) gated; A = D (the bias of W_out) with model.bias, else 0."""
    fixed = ffn_parameters(cfg, 0, kind, active=active)
    return fixed, ffn_parameters(cfg, 1, kind, active=active) - fixed


def position_params(cfg: ModelConfig, n_layers: int) -> tuple[int, int]:
    """One stack's position scheme as (non-embedding, embedding) parameters, from its row of
    `POSITION_FACTS` (`parameters`, `embedding`)."""
    facts = POSITION_FACTS[cfg.position.kind]
    count = facts.parameters(cfg, n_layers)
    return (0, count) if facts.embedding else (count, 0)


def stack_layers(cfg: ModelConfig) -> list[tuple[int, bool]]:
    """The family's stacks as (layers, with cross-attention): one stack, or for an
    encoder-decoder n_layers encoder blocks and n_decoder_layers decoder blocks."""
    if FAMILY_FACTS[cfg.family].cross_attention:
        return [(cfg.n_layers, False), (cfg.decoder_layers, True)]
    return [(cfg.n_layers, False)]


def stack_params(cfg: ModelConfig, n_layers: int, *, cross: bool, active: bool = False) -> tuple[int, int]:
    """One stack as (A, B). A block is self-attention, cross-attention in a decoder of an
    encoder-decoder, and a feed-forward unit (each layer's kind: `zoo.config.facts.ffn.layer_kinds`),
    with the norms of model.norm's placement around each (sandwich: two) or, in a parallel block
    with shared norms, one placement's worth in all (`zoo.config.facts.blocks.norms_per_block`);
    a stack adds a norm on the embeddings (model.embed_norm), a final norm (every placement but
    post) and its position scheme's parameters. With `active`, a mixture's active parameters.
    A recurrent layer (`model.attention=gated_deltanet`, `model.layer_pattern`) counts its row's
    parameters in self-attention's place (`mixer_params`)."""
    attentions = 2 if cross else 1
    block = (attentions - 1) * attention_params(cfg) + norms_per_block(cfg, attentions + 1) * norm_params(cfg)
    # each layer's mixer: self-attention, or a recurrent kind's row (`zoo.config.facts.attention`)
    mixers = mixer_counts(cfg, n_layers)
    block_mixers = sum(n * mixer_params(cfg, kind) for kind, n in mixers.items())
    # one count per kind of unit, times its layers (a stack of millions of layers is counted,
    # and refused, at once)
    units = [
        (n, feedforward_params(cfg, kind, active=active)) for kind, n in Counter(layer_kinds(cfg, n_layers)).items()
    ]
    norms = int(cfg.embed_norm) + int(PLACEMENT_FACTS[cfg.norm].final_norm)
    fixed = n_layers * block + block_mixers + sum(n * a for n, (a, _) in units) + norms * norm_params(cfg)
    fixed += residual_parameters(cfg, n_layers, cross=cross)  # value residual, value embeddings, hyper-connections
    return fixed + position_params(cfg, n_layers)[0], sum(n * b for n, (_, b) in units)


def linear_in_d_ff(cfg: ModelConfig, *, active: bool = False) -> tuple[int, int]:
    """(A, B) with non-embedding parameters A + B·F: the family's stacks (encoder-decoder:
    n_layers encoder blocks and n_decoder_layers decoder blocks with cross-attention) and,
    with model.head_transform, its dense D × D (+ D bias) and norm. With `active`, the
    parameters one token passes through (they differ under model.ffn=moe)."""
    stacks = [stack_params(cfg, n_layers, cross=cross, active=active) for n_layers, cross in stack_layers(cfg)]
    fixed = sum(a for a, _ in stacks)
    if cfg.head_transform:
        fixed += cfg.d_model * cfg.d_model + (cfg.d_model if cfg.bias else 0) + norm_params(cfg)
    return fixed, sum(b for _, b in stacks)


def non_embedding_params(cfg: ModelConfig) -> int:
    """The non-embedding parameter count of the model `cfg` describes (cfg.d_ff set)."""
    fixed, per_unit = linear_in_d_ff(cfg)
    return fixed + per_unit * cfg.d_ff


def active_non_embedding_params(cfg: ModelConfig) -> int:
    """The non-embedding parameters one token passes through (cfg.d_ff set): under model.ffn=moe
    each mixture layer's router, top-k routed experts and shared experts instead of all its
    experts; every other parameter as `non_embedding_params` counts it (a dense model: equal)."""
    fixed, per_unit = linear_in_d_ff(cfg, active=True)
    return fixed + per_unit * cfg.d_ff


STACK = "model.d_model, model.n_layers, model.d_ff (the stack)"  # parameter_parts' hidden layers


def parameter_parts(cfg: ModelConfig) -> dict[str, int]:
    """The parameters of the model `cfg` describes, by the keys that size them: the stack
    (non-embedding), the token embeddings (and an untied output head), position tables that
    count as embeddings (each stack's). A lower bound of the whole (token types and an output
    bias are left out)."""
    embeddings = cfg.vocab_size * cfg.d_model * (1 if cfg.tie_embeddings else 2)
    positions = sum(position_params(cfg, n_layers)[1] for n_layers, _ in stack_layers(cfg))
    parts = {
        STACK: non_embedding_params(cfg),
        "model.vocab_size (token embeddings)": embeddings,
        "model.max_seq_len (learned positions)": positions,
    }
    if cfg.value_embeds:  # each stack's value-embedding tables
        parts["model.value_embeds (value embeddings)"] = len(stack_layers(cfg)) * VALUE_EMBED_FACTS.embedding(cfg)
    return parts


def largest_part(cfg: ModelConfig, parts: dict[str, int]) -> tuple[str, int]:
    """The part of `parts` (`parameter_parts(cfg)`) with the most parameters, as (what names the
    one key to lower, its parameters): the stack is named by the key it grows with most
    (`stack_key`), e.g. model.moe_experts, not by all the keys that size it."""
    part = max(parts, key=parts.__getitem__)
    return (f"{stack_key(cfg)} (the stack)" if part == STACK else part), parts[part]


def stack_key(cfg: ModelConfig) -> str:
    """The key the stack's parameters come from most: of the keys that size it, the one whose
    value, brought back to a reference size, removes the most parameters. A key's reference is
    its default, or for a width derived from the others what they derive (d_ff from d_model,
    the decoder's depth from n_layers, ...), and the widths derived from a key follow it; a d_ff
    sized by model.ff_mult or model.param_budget is named by that key, the one the command sets."""
    now = non_embedding_params(cfg)
    best, removed = "d_model", 0
    for name, smaller_sizes in _smaller(cfg).items():
        fewer = now - non_embedding_params(_resized(cfg, smaller_sizes))
        if fewer > removed:
            best, removed = name, fewer
    if best == "d_ff":
        best = next((key for key in ("ff_mult", "param_budget") if getattr(cfg, key) is not None), best)
    return f"model.{best}"


def _resized(cfg: ModelConfig, sizes: dict[str, int]) -> ModelConfig:
    """A copy of `cfg` with `sizes` set as they are, for counting its parameters only: the sizes
    are a reference to count against, not a config a run could validate (dataclasses.replace
    would derive and check them again), and `cfg` itself stays as it is."""
    import copy

    resized = copy.copy(cfg)
    for key, value in sizes.items():
        settle(resized, key, value)
    return resized


def _smaller(cfg: ModelConfig) -> dict[str, dict[str, int]]:
    """Each key that sizes the stack and is above its reference -> the sizes of the model with
    that key at its reference (the widths derived from it following)."""

    def plain_d_ff(d_model: int) -> int:
        return round_up(int(8 * d_model / 3), 64) if cfg.activation in GATED else 4 * d_model

    defaults = {f.name: f.default for f in fields(cfg) if isinstance(f.default, int)}
    out: dict[str, dict[str, int]] = {}
    d_model = defaults["d_model"]
    if cfg.d_model > d_model:
        out["d_model"] = {"d_model": d_model}
        if cfg.d_ff == plain_d_ff(cfg.d_model):  # derived from it
            out["d_model"]["d_ff"] = plain_d_ff(d_model)
        if cfg.head_dim == cfg.d_model // cfg.n_heads:
            out["d_model"]["head_dim"] = max(1, d_model // cfg.n_heads)
    if cfg.n_heads > defaults["n_heads"]:
        heads = defaults["n_heads"]
        out["n_heads"] = {"n_heads": heads, "n_kv_heads": min(cfg.n_kv_heads, heads)}
        if cfg.head_dim == cfg.d_model // cfg.n_heads:
            out["n_heads"]["head_dim"] = cfg.d_model // heads
    references = {
        "n_layers": defaults["n_layers"],
        "n_decoder_layers": cfg.n_layers,
        "head_dim": max(1, cfg.d_model // cfg.n_heads),
        "d_ff": plain_d_ff(cfg.d_model),
        "moe_experts": defaults["moe_experts"],
        "moe_d_ff": cfg.d_ff,
        "moe_shared": defaults["moe_shared"],
    }
    for name, reference in references.items():
        value = getattr(cfg, name)
        if value is not None and value > reference:
            out[name] = {name: reference}
    return out


def d_ff_for_budget(cfg: ModelConfig, budget: int) -> int:
    """The d_ff whose model has the non-embedding parameter count nearest to `budget`
    (cfg.d_ff is not read): all of them, or the active ones with
    model.param_budget_counts=active. Under model.ffn=moe the experts are d_ff wide unless
    model.moe_d_ff sets their width (then only the dense layers follow d_ff)."""
    active = getattr(cfg.param_budget_counts, "value", cfg.param_budget_counts) == "active"
    base, slope = linear_in_d_ff(cfg, active=active)
    if slope == 0:
        raise ConfigError(
            f"model.param_budget={budget:,} cannot size d_ff: no layer's width follows it (every layer is a "
            f"mixture of model.moe_d_ff={cfg.moe_d_ff} experts); set model.moe_d_ff=null or model.moe_every > 1"
        )
    d_ff = round((budget - base) / slope)
    if d_ff < 1:
        raise ConfigError(
            f"model.param_budget={budget:,} is too small: this composition has {base + slope:,} "
            f"non-embedding parameters at d_ff=1"
        )
    return d_ff


def steps_for_tokens(cfg: ModelConfig, tokens_per_param: float, tokens_per_step: int) -> int:
    """The optimizer steps that train the model `cfg` describes on `tokens_per_param` tokens per
    non-embedding parameter (e.g. about 20, Hoffmann et al. 2022), at `tokens_per_step` tokens a
    step (global batch × sequence length), rounded up."""
    if not tokens_per_param > 0:
        raise ConfigError(f"tokens per parameter must be > 0, got {tokens_per_param}")
    if tokens_per_step < 1:
        raise ConfigError(f"tokens per step must be >= 1, got {tokens_per_step}")
    return max(1, -(-int(round(tokens_per_param * non_embedding_params(cfg))) // tokens_per_step))


# -- multi-token prediction (task.mtp_depth; zoo.config.facts.mtp) ------------------------------
def mtp_module_params(cfg: ModelConfig) -> int:
    """One multi-token prediction module (`zoo.config.facts.mtp.MTP_FACTS`): the norms of h and of
    Emb(t), M_k (2D × D, + D with model.bias), one decoder block with the feed-forward unit of
    the stack's last layer, and a final norm (every placement but post). The token table and the
    output head are the model's, not counted again."""
    D = cfg.d_model
    kind = layer_kinds(cfg, cfg.n_layers)[-1]
    fixed, per_unit = feedforward_params(cfg, kind)
    block = attention_params(cfg) + norms_per_block(cfg, 2) * norm_params(cfg) + fixed + per_unit * cfg.d_ff
    norms = 2 + int(PLACEMENT_FACTS[cfg.norm].final_norm)
    return norms * norm_params(cfg) + 2 * D * D + (D if cfg.bias else 0) + block


def mtp_params(cfg: ModelConfig, depth: int) -> int:
    """The parameters task.mtp_depth=`depth` adds beside the model: `depth` modules."""
    return depth * mtp_module_params(cfg)
