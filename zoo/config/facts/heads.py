"""Facts about what attention does to each head's softmax and output, in two torch-free tables:
the sink logit that joins each head's softmax denominator (`model.attn_sink`) and the sigmoid
gate on each head's output before W_o (`model.attn_gate`). Each row says what it computes, where
it comes from, the parameters and matrix-multiply FLOPs it adds to one attention (self- and
cross-attention alike) and what it refuses. `ModelConfig` runs `check_heads` before any weight
exists; `zoo.config.schema.params` and `zoo.config.schema.flops` count from these rows;
`zoo.nn.sink` and `zoo.nn.gate` build them and `tests/nn/test_heads.py` keeps the two in step.

A sink s_h adds exp(s_h) to head h's softmax denominator, p_ij = exp(a_ij) / (exp(s_h) + Σ_j
exp(a_ij)), so a query may give less than all its weight to the keys (gpt-oss; Xiao et al. 2024's
sink token without a token). It runs on every attention path, SDPA's included, exactly: the
keys and values get one more column, a zero key and a zero value, and the scores' additive bias
that column's logit s_h (the zero value adds nothing to the output). Its cost is that column:
4·H·Dh FLOPs per query (q·0 and p·0, counted here as torch counts them) and an additive float
mask (B, H, T, S + 1) where SDPA could otherwise take its causal flag (on CUDA the flash kernel
takes no mask; the memory-efficient kernel does). The KV cache holds no sink: the column joins
the cached keys at each step, so cached decoding equals the uncached forward."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.facts.kv import KVKind
from zoo.config.facts.starts import NORMAL, Starts

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig


class AttnSink(Choice):
    none = "none"  # softmax over the keys alone
    learned = "learned"  # a learned logit per head in the denominator (gpt-oss `sinks`)
    off_by_one = "off_by_one"  # a logit fixed at 0: exp(a_i) / (1 + Σ exp(a_j)) (Miller 2023)


class AttnGate(Choice):
    none = "none"  # each head's output as attention gives it
    headwise = "headwise"  # one sigmoid per head and token, sigmoid(x W_g), W_g D × H
    elementwise = "elementwise"  # one sigmoid per head dimension, W_g D × H·Dh (Qwen3-Next)


def _none(cfg: ModelConfig) -> int:
    return 0


def _refuses_nothing(cfg: ModelConfig) -> str | None:
    """Valid with every family, position scheme, norm placement and attention variant."""
    return None


@dataclass(frozen=True, kw_only=True)
class SinkFacts:
    """One sink kind's row.

    - `what`: the softmax it computes; `paper`: where it comes from.
    - `parameters(cfg)`: the parameters it adds to one attention.
    - `flops(cfg)`: the matrix-multiply FLOPs it adds per token and attention (the sink column).
    - `starts`: how its parameters start, by name (`zoo.config.facts.starts`).
    - `refuses`: the one-line refusal of a model config it cannot serve, None where it serves it.
    """

    what: str
    paper: str
    parameters: Callable[[ModelConfig], int] = _none
    flops: Callable[[ModelConfig], int] = _none
    starts: Starts = field(default_factory=dict, compare=False)
    refuses: Callable[[ModelConfig], str | None] = _refuses_nothing


def _sink_column_flops(cfg: ModelConfig) -> int:
    """q·kᵀ and p·v over the one zero key/value column: 2·H·Dh each."""
    return 4 * cfg.n_heads * cfg.head_dim


SINK_FACTS: dict[AttnSink, SinkFacts] = {
    AttnSink.none: SinkFacts(
        what="p_ij = exp(a_ij) / Σ_j exp(a_ij): every query's weights sum to 1",
        paper="Vaswani et al. 2017",
    ),
    AttnSink.learned: SinkFacts(
        what="p_ij = exp(a_ij) / (exp(s_h) + Σ_j exp(a_ij)), a learned logit s_h per query head "
        "(the softmax over [scores, s_h], the sink's column dropped)",
        paper="OpenAI 2025 (gpt-oss); Xiao et al. 2024 (attention sinks)",
        parameters=lambda cfg: cfg.n_heads,
        flops=_sink_column_flops,
        starts={"logits": NORMAL},  # Normal(0, model.init_std), as gpt-oss's `sinks`
    ),
    AttnSink.off_by_one: SinkFacts(
        what="p_ij = exp(a_ij) / (1 + Σ_j exp(a_ij)): a sink logit fixed at 0 in every head",
        paper="Miller 2023 (Attention Is Off By One)",
        flops=_sink_column_flops,
    ),
}


@dataclass(frozen=True, kw_only=True)
class GateFacts:
    """One gate kind's row.

    - `what`: what multiplies each head's output; `paper`: where it comes from.
    - `width(cfg)`: the gates per token and attention (the outputs of W_g; 0: no gate).
    - `refuses`: the one-line refusal of a model config it cannot serve, None where it serves it.

    W_g reads the attention's input x (the normed residual stream, or the decoder's stream in a
    cross-attention), has a bias with model.bias, and starts as every linear layer does.
    """

    what: str
    paper: str
    width: Callable[[ModelConfig], int] = _none
    refuses: Callable[[ModelConfig], str | None] = _refuses_nothing


GATE_FACTS: dict[AttnGate, GateFacts] = {
    AttnGate.none: GateFacts(what="o_h = attention's output of head h", paper="Vaswani et al. 2017"),
    AttnGate.headwise: GateFacts(
        what="o_h ⊙ sigmoid(x W_g)_h: one gate per head and token, W_g D × H",
        paper="Qiu et al. 2025 (Gated Attention for LLMs: head-wise G1)",
        width=lambda cfg: cfg.n_heads,
    ),
    AttnGate.elementwise: GateFacts(
        what="o_h ⊙ sigmoid(x W_g)_h: one gate per head dimension and token, W_g D × H·Dh",
        paper="Qiu et al. 2025 (Gated Attention for LLMs: element-wise G1); Qwen3-Next (2025)",
        width=lambda cfg: cfg.n_heads * cfg.head_dim,
    ),
}


def gate_parameters(cfg: ModelConfig) -> int:
    """W_g (D × width) and, with model.bias, its bias (width)."""
    width = GATE_FACTS[cfg.attn_gate].width(cfg)
    return width * (cfg.d_model + int(cfg.bias))


def heads_parameters(cfg: ModelConfig) -> int:
    """The parameters the sink and the gate add to one attention."""
    return SINK_FACTS[cfg.attn_sink].parameters(cfg) + gate_parameters(cfg)


def heads_flops(cfg: ModelConfig) -> int:
    """The matrix-multiply FLOPs the sink and the gate add per token to one attention: the
    sink's column, and x W_g (2·D·width)."""
    return SINK_FACTS[cfg.attn_sink].flops(cfg) + 2 * cfg.d_model * GATE_FACTS[cfg.attn_gate].width(cfg)


def check_heads(cfg: ModelConfig) -> dict[str, Choice]:
    """model.attn_sink and model.attn_gate read as their kinds (an unknown kind refused naming
    the kinds), for the schema to settle; refuses what their rows cannot serve."""
    sink = AttnSink.parse(cfg.attn_sink, "model.attn_sink")
    gate = AttnGate.parse(cfg.attn_gate, "model.attn_gate")
    for refusal in (SINK_FACTS[sink].refuses(cfg), GATE_FACTS[gate].refuses(cfg)):
        if refusal is not None:
            raise ConfigError(refusal)
    if cfg.kv == KVKind.latent:  # zoo.nn.latent_attention has neither the sink column nor the gate
        for name, kind, off in (("attn_sink", sink, AttnSink.none), ("attn_gate", gate, AttnGate.none)):
            if kind != off:
                raise ConfigError(
                    f"model.{name}={kind.value} is built into per-head attention, not model.kv="
                    f"{KVKind.latent.value}; use model.kv={KVKind.heads.value} or model.{name}={off.value}"
                )
    return {"attn_sink": sink, "attn_gate": gate}
