"""Facts about how a mixture of experts (`model.ffn=moe`) keeps its load balanced and picks its
experts, in one torch-free table: the balancing kinds (`model.moe_balance`), each a row with
what it does, its paper, the keys it reads and its refusals; and the checks of DeepSeek-V3's
routing keys (group-limited top-k, the routed scale, the dense first layers).

Balancing (`MoEBalance`):

- `aux_loss`: Switch's load-balancing loss E·Σ_i f_i·P_i added to the training loss at
  task.moe_balance (Fedus et al. 2021); the default, and zoo's behaviour before the key existed.
- `bias`: auxiliary-loss-free balancing (Wang et al. 2024; DeepSeek-V3 §2.1.2): a per-expert
  bias b, added to the gate's scores for the top-k choice only (the weights stay the gate's),
  updated outside the gradient after each optimizer step, b_i += u·sign(mean load − load_i) with
  u = model.moe_bias_rate (DeepSeek-V3: 0.001), the loads counted over every micro-batch of the
  step and every data-parallel rank. The bias is a buffer of each mixture layer, saved in
  checkpoints (DeepSeek-V3's `e_score_correction_bias`).
- `none`: neither; the router learns from the task's loss alone (and the router z-loss).

None of them holds parameters or spends matrix-multiply FLOPs: the parameter, FLOP and KV-cache
counts of the `moe` row of `zoo.config.facts.ffn` stand as they are.

DeepSeek-V3's routing (its `DeepseekV3TopkRouter`): with model.moe_groups = G > 1 the E experts
fall in G groups of E/G; a token scores each group by the sum of its two best scores (bias
included) and picks its top-k experts within the model.moe_top_groups best groups. The picked
weights (renormalised with model.moe_renorm) are multiplied by model.moe_scale (its
routed_scaling_factor). model.moe_first_dense keeps the first layers of each stack dense (its
first_k_dense_replace)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.facts.layers import stack_depths

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig

DEFAULT_BIAS_RATE = 0.001  # DeepSeek-V3's bias update speed γ (§4.2)


class MoEBalance(Choice):
    """How a mixture keeps its experts' loads even."""

    aux_loss = "aux_loss"  # Switch's load-balancing loss at task.moe_balance (Fedus et al. 2021)
    bias = "bias"  # a per-expert selection bias updated outside the gradient (Wang et al. 2024)
    none = "none"  # no balancing: the router learns from the task's loss alone


def _refuses_nothing(cfg: ModelConfig) -> str | None:
    """Valid with every family, position scheme, norm and activation."""
    return None


def _bias_refuses(cfg: ModelConfig) -> str | None:
    """The bias steers the choice of experts: it needs a choice (top-k below E)."""
    if cfg.moe_top_k >= cfg.moe_experts:
        return (
            f"model.moe_balance=bias steers which experts a token picks, but model.moe_top_k={cfg.moe_top_k} picks "
            f"all model.moe_experts={cfg.moe_experts}; lower model.moe_top_k"
        )
    return None


@dataclass(frozen=True, kw_only=True)
class BalanceFacts:
    """One balancing kind's row: `what` it does, its `paper`, the dotted `keys` it alone reads
    (under another kind they stay at their defaults) and `refuses`, the one-line refusal of a
    model config it cannot serve (None where it serves it)."""

    what: str
    paper: str
    keys: tuple[str, ...] = ()
    refuses: Callable[[ModelConfig], str | None] = _refuses_nothing


BALANCE_FACTS: dict[MoEBalance, BalanceFacts] = {
    MoEBalance.aux_loss: BalanceFacts(
        what="task.moe_balance x Switch's load-balancing loss E·Σ_i f_i·P_i added to the training loss",
        paper="Fedus et al. 2021 (Switch Transformer), eq. 4",
        keys=("task.moe_balance",),
    ),
    MoEBalance.bias: BalanceFacts(
        what="a per-expert bias added to the gate's scores for the top-k choice only, "
        "b_i += model.moe_bias_rate·sign(mean load − load_i) after each optimizer step",
        paper="Wang et al. 2024 (Auxiliary-Loss-Free Load Balancing); DeepSeek-AI 2024 (DeepSeek-V3), §2.1.2",
        keys=("model.moe_bias_rate",),
        refuses=_bias_refuses,
    ),
    MoEBalance.none: BalanceFacts(
        what="no balancing: the router learns from the task's loss (and the router z-loss) alone",
        paper="Shazeer et al. 2017 (the imbalance the others correct)",
    ),
}

# the model keys of this module, all read under model.ffn=moe only (zoo.config.facts.ffn.MOE_KEYS)
ROUTING_KEYS = ("moe_balance", "moe_bias_rate", "moe_groups", "moe_top_groups", "moe_scale", "moe_first_dense")


def check_moe_routing(cfg: ModelConfig) -> MoEBalance:
    """The routing keys in range, and the balancing row's refusal; -> model.moe_balance parsed
    (the schema settles it)."""
    balance = MoEBalance.parse(cfg.moe_balance, "model.moe_balance")
    _number("moe_bias_rate", cfg.moe_bias_rate)
    _number("moe_scale", cfg.moe_scale)
    for name in ("moe_groups", "moe_top_groups"):
        _integer(name, getattr(cfg, name), 1)
    _integer("moe_first_dense", cfg.moe_first_dense, 0)
    if balance != MoEBalance.bias and cfg.moe_bias_rate != DEFAULT_BIAS_RATE:
        raise ConfigError(
            f"model.moe_bias_rate={cfg.moe_bias_rate!r} is read only under model.moe_balance=bias, not {balance.value}"
        )
    groups, top = cfg.moe_groups, cfg.moe_top_groups
    if top > groups:
        raise ConfigError(f"model.moe_top_groups ({top}) must be <= model.moe_groups ({groups})")
    if groups > 1:
        if cfg.moe_experts % groups:
            raise ConfigError(f"model.moe_experts ({cfg.moe_experts}) must be divisible by model.moe_groups ({groups})")
        per_group = cfg.moe_experts // groups
        if per_group < 2:  # a group's score is the sum of its two best
            raise ConfigError(
                f"model.moe_groups={groups} leaves {per_group} expert per group; a group is scored by its "
                f"two best experts: at most {cfg.moe_experts // 2} groups"
            )
        if cfg.moe_top_k > top * per_group:
            raise ConfigError(
                f"model.moe_top_k ({cfg.moe_top_k}) exceeds the {top * per_group} experts of model.moe_top_groups="
                f"{top} groups of {per_group}"
            )
    if cfg.ffn.value == "moe":
        for depth_key, depth in stack_depths(cfg):
            if not any(mixture_layer(cfg, i) for i in range(depth)):
                raise ConfigError(
                    f"model.moe_first_dense={cfg.moe_first_dense} with model.moe_every={cfg.moe_every} leaves no "
                    f"mixture among model.{depth_key}={depth} layers; lower model.moe_first_dense"
                )
    refusal = BALANCE_FACTS[balance].refuses(cfg) if cfg.ffn.value == "moe" else None
    if refusal is not None:
        raise ConfigError(refusal)
    return balance


def mixture_layer(cfg: ModelConfig, i: int) -> bool:
    """Whether layer i of a stack is a mixture (under model.ffn=moe): past the first
    model.moe_first_dense layers, and every model.moe_every-th, the layers with (i + 1) % k == 0."""
    return i >= cfg.moe_first_dense and (i + 1) % cfg.moe_every == 0


def _number(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ConfigError(f"model.{name} must be a number > 0, got {value!r}")


def _integer(name: str, value: Any, least: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ConfigError(f"model.{name} must be an integer >= {least}, got {value!r}")


def check_balance_weight(model: Any, task: Any) -> None:
    """A run's task.moe_balance (the aux_loss weight) set away from its default under a model
    whose model.moe_balance does not read it: refused, as it would change nothing."""
    default = next(f.default for f in fields(task) if f.name == "moe_balance")
    if model.ffn.value == "moe" and model.moe_balance != MoEBalance.aux_loss and task.moe_balance != default:
        raise ConfigError(
            f"task.moe_balance={task.moe_balance!r} is read only under model.moe_balance=aux_loss, "
            f"not {model.moe_balance.value}; leave it at {default}"
        )
