"""Facts about each feed-forward kind (`model.ffn`), in one torch-free table: what it is, the
parameters it holds (all of them, and the ones a token passes through: its active parameters),
and the matrix-multiply FLOPs it spends per token, from the model config and the hidden width F
(model.d_ff); and what it refuses. The parameter count (`zoo.config.schema.params`),
`model.param_budget` and the FLOP count (`zoo.config.schema.flops`) read these rows;
`zoo.nn.feedforward.FFNS` is keyed by the same enum, and `tests/config/facts/test_ffn_table.py`
keeps the two in step.

A mixture of experts (`moe`) replaces the dense unit in the layers `moe_layers` names (every
model.moe_every-th); the others stay dense. Its experts are model.moe_d_ff wide, or F where that
is null, so that `model.param_budget` sizes dense layers and experts alike from F."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.facts.activations import ACTIVATION_FACTS
from zoo.config.facts.moe_experts import EXPERT_FACTS, expert_bias_parameters, expert_kind
from zoo.config.facts.moe_routing import ROUTING_KEYS, MoEBalance, mixture_layer
from zoo.config.facts.moe_shared import shared_gate_flops, shared_gate_parameters
from zoo.config.facts.starts import NORMAL, Starts

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig


class FFNKind(Choice):
    dense = "dense"  # one position-wise unit for every token (Vaswani et al. 2017)
    moe = "moe"  # a mixture of experts: each token goes through the top-k of E units (Shazeer et al. 2017)


class MoEGate(Choice):
    """How the router turns its logits into the weights of the experts a token picks."""

    softmax = "softmax"  # softmax over the E logits, then the top k (Mixtral, OLMoE, Switch)
    sigmoid = "sigmoid"  # an independent sigmoid per expert, then the top k (DeepSeek-V3)


def _refuses_nothing(cfg: ModelConfig) -> str | None:
    """Valid with every family, position scheme, norm and activation."""
    return None


@dataclass(frozen=True, kw_only=True)
class FFNFacts:
    """One feed-forward kind's row.

    - `what`: what one unit computes; `paper`: where it comes from.
    - `parameters(cfg, F)`: the parameters one unit of `cfg` holds at hidden width F. Linear in F:
      the parameter budget (`model.param_budget`) solves for F from two evaluations of it.
    - `active(cfg, F)`: the parameters one token passes through (a dense unit: all of them; a
      mixture: the router, its top-k experts and the shared ones). Linear in F.
    - `flops(cfg, F)`: the matrix-multiply FLOPs of one unit for one token (2 per multiply-add
      of the weights a token passes through: 2 x `active` without biases).
    - `refuses`: the one-line refusal for a model config it cannot serve, None where it serves it.
    - `keys`: the dotted config keys this kind alone reads (a mixture's model.moe_* and the
      task's router losses); under another kind they stay at their defaults and change nothing,
      so `zoo-compare` leaves them out of an arm's name (`unread_keys`).
    - `starts`: how the parameters its modules hold themselves (not through an `nn.Linear`)
      start, by name (`zoo.config.facts.starts`): a mixture's stacked expert matrices.
    """

    what: str
    paper: str
    parameters: Callable[[ModelConfig, int], int]
    active: Callable[[ModelConfig, int], int]
    flops: Callable[[ModelConfig, int], int]
    refuses: Callable[[ModelConfig], str | None] = _refuses_nothing
    keys: tuple[str, ...] = ()
    starts: Starts = field(default_factory=dict, compare=False)


def _unit_parameters(D: int, F: int, gated: bool, bias: bool) -> int:
    """One dense unit: W_in (D × F, gated D × 2·F: gate and up), W_out (F × D); biases F (2·F) + D."""
    inner = 2 if gated else 1
    return (inner + 1) * D * F + ((inner * F + D) if bias else 0)


def _unit_flops(D: int, F: int, gated: bool) -> int:
    """One dense unit for one token: 2 per weight of W_in and W_out."""
    return 2 * (3 if gated else 2) * D * F


def _dense_parameters(cfg: ModelConfig, F: int) -> int:
    return _unit_parameters(cfg.d_model, F, gated(cfg), cfg.bias)


def _dense_flops(cfg: ModelConfig, F: int) -> int:
    return _unit_flops(cfg.d_model, F, gated(cfg))


def expert_width(cfg: ModelConfig, F: int) -> int:
    """The hidden width of one expert (and of each shared expert): model.moe_d_ff, or F."""
    return cfg.moe_d_ff if cfg.moe_d_ff is not None else F


def _moe_parameters(cfg: ModelConfig, F: int, experts: int) -> int:
    """The router (E × D, no bias), `experts` units of the expert width, and the shared experts
    (one dense unit moe_shared times as wide). Biases are refused with moe, except the router's
    and the routed experts' of an expert kind that has them (`zoo.config.facts.moe_experts`)."""
    Fe, D = expert_width(cfg, F), cfg.d_model
    biases = expert_bias_parameters(cfg, Fe, experts) + shared_gate_parameters(cfg)  # the shared experts' gate
    return cfg.moe_experts * D + (experts + cfg.moe_shared) * _unit_parameters(D, Fe, gated(cfg), False) + biases


def _moe_total(cfg: ModelConfig, F: int) -> int:
    return _moe_parameters(cfg, F, cfg.moe_experts)


def _moe_active(cfg: ModelConfig, F: int) -> int:
    return _moe_parameters(cfg, F, cfg.moe_top_k)


def _moe_flops(cfg: ModelConfig, F: int) -> int:
    """The router's logits (2·D·E) and the top-k and shared experts a token passes through (a
    token an expert's capacity drops is still counted: the nominal, dropless cost)."""
    Fe, D = expert_width(cfg, F), cfg.d_model
    experts = (cfg.moe_top_k + cfg.moe_shared) * _unit_flops(D, Fe, gated(cfg))
    return 2 * D * cfg.moe_experts + experts + shared_gate_flops(cfg)  # router, experts, the shared experts' gate


def _moe_refuses(cfg: ModelConfig) -> str | None:
    """Biases (the stacked expert weights hold none) and μP (its rules for the stacked expert
    matrices and the router are not worked out here)."""
    if cfg.bias and not EXPERT_FACTS[expert_kind(cfg)].biases:  # model.moe_expert=gpt_oss holds them
        return "model.ffn=moe holds no biases (router and experts as in Mixtral and OLMoE): set model.bias=false"
    if cfg.parametrization.value != "standard":
        return (
            "model.ffn=moe is not served under model.parametrization=mup (its rules for the router and the "
            "stacked expert matrices are not worked out); use model.parametrization=standard"
        )
    return None


MOE_KEYS = (
    "moe_experts",
    "moe_top_k",
    "moe_d_ff",
    "moe_shared",
    "moe_gate",
    "moe_renorm",
    "moe_capacity",
    "moe_every",
    *ROUTING_KEYS,
)

FFN_FACTS: dict[FFNKind, FFNFacts] = {
    FFNKind.dense: FFNFacts(
        what="W_out · act(W_in · x), or gated W_out · (act(W_gate · x) ⊙ W_up · x)",
        paper="Vaswani et al. 2017, §3.3; gated: Shazeer 2020",
        parameters=_dense_parameters,
        active=_dense_parameters,
        flops=_dense_flops,
    ),
    FFNKind.moe: FFNFacts(
        what="Σ over the top-k experts e of x's router weights g_e(x) · FFN_e(x), plus shared experts; "
        "the other layers (model.moe_every) dense",
        paper="Shazeer et al. 2017; Fedus et al. 2021 (Switch); Jiang et al. 2024 (Mixtral); "
        "Muennighoff et al. 2024 (OLMoE); Dai et al. 2024 (DeepSeekMoE: fine-grained and shared experts)",
        parameters=_moe_total,
        active=_moe_active,
        flops=_moe_flops,
        refuses=_moe_refuses,
        keys=(
            *(f"model.{name}" for name in MOE_KEYS),
            "task.moe_balance",
            "task.moe_router_z",
            "task.moe_seq_balance",
            "model.moe_expert",
            "model.moe_shared_gate",
        ),
        starts={"w_in": NORMAL, "w_out": NORMAL},  # zoo.nn.moe.Experts: Normal(0, model.init_std)
    ),
}


def unread_keys(kind: FFNKind) -> set[str]:
    """The keys another kind's row reads and `kind`'s does not: nothing under `kind` reads them."""
    return {key for row in FFN_FACTS.values() for key in row.keys} - set(FFN_FACTS[kind].keys)


def gated(cfg: ModelConfig) -> bool:
    """Whether `cfg`'s activation is a gated linear unit."""
    return ACTIVATION_FACTS[cfg.activation].gated


def layer_kinds(cfg: ModelConfig, n_layers: int) -> list[FFNKind]:
    """The feed-forward kind of each of a stack's `n_layers` layers: model.ffn, except that with
    moe only the layers i with (i + 1) % model.moe_every == 0 past the first model.moe_first_dense
    are mixtures, the others dense (`zoo.config.facts.moe_routing.mixture_layer`)."""
    if cfg.ffn != FFNKind.moe:
        return [cfg.ffn] * n_layers
    return [FFNKind.moe if mixture_layer(cfg, i) else FFNKind.dense for i in range(n_layers)]


def ffn_parameters(cfg: ModelConfig, d_ff: int, kind: FFNKind | None = None, *, active: bool = False) -> int:
    """The parameters of one feed-forward unit of `kind` (default `cfg.ffn`) at hidden width
    `d_ff`: all of them, or with `active` those one token passes through."""
    facts = FFN_FACTS[kind if kind is not None else cfg.ffn]
    return (facts.active if active else facts.parameters)(cfg, d_ff)


def ffn_flops(cfg: ModelConfig, kind: FFNKind | None = None) -> int:
    """The matrix-multiply FLOPs of one feed-forward unit of `kind` (default `cfg.ffn`) for one token."""
    return FFN_FACTS[kind if kind is not None else cfg.ffn].flops(cfg, cfg.d_ff)


def check_ffn(cfg: ModelConfig) -> None:
    """Refuse a config that `cfg.ffn`'s row cannot serve."""
    refusal = FFN_FACTS[cfg.ffn].refuses(cfg)
    if refusal is not None:
        raise ConfigError(refusal)


def check_moe_keys(cfg: ModelConfig) -> None:
    """The model.moe_* keys (model.moe_gate parsed by the schema first): in range under
    model.ffn=moe; at their defaults under any other kind (they would be read by nothing)."""
    MoEBalance.parse(cfg.moe_balance, "model.moe_balance")  # an unknown kind named as such first
    if cfg.ffn != FFNKind.moe:
        defaults = {f.name: f for f in fields(cfg)}  # the schema's own defaults
        for name in MOE_KEYS:
            if getattr(cfg, name) != defaults[name].default:  # a Choice equals its string
                raise ConfigError(
                    f"model.{name}={getattr(cfg, name)!r} only applies to model.ffn=moe, not {cfg.ffn.value}"
                )
        return
    for name in ("moe_experts", "moe_top_k", "moe_every"):
        _positive_int(name, getattr(cfg, name))
    if cfg.moe_d_ff is not None:
        _positive_int("moe_d_ff", cfg.moe_d_ff)
    if not isinstance(cfg.moe_shared, int) or isinstance(cfg.moe_shared, bool) or cfg.moe_shared < 0:
        raise ConfigError(f"model.moe_shared must be an integer >= 0, got {cfg.moe_shared!r}")
    if cfg.moe_top_k > cfg.moe_experts:
        raise ConfigError(f"model.moe_top_k ({cfg.moe_top_k}) must be <= model.moe_experts ({cfg.moe_experts})")
    if not isinstance(cfg.moe_renorm, bool):
        raise ConfigError(f"model.moe_renorm must be true or false, got {cfg.moe_renorm!r}")
    if cfg.moe_capacity is not None and (
        isinstance(cfg.moe_capacity, bool)
        or not isinstance(cfg.moe_capacity, (int, float))
        or not 0 < cfg.moe_capacity < float("inf")
    ):
        raise ConfigError(f"model.moe_capacity must be a number > 0 (or null: dropless), got {cfg.moe_capacity!r}")


def _positive_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"model.{name} must be a positive integer, got {value!r}")
