"""Facts about the gate on a mixture's shared experts (`model.moe_shared_gate`), in one torch-free
table: what it computes, where it comes from, the parameters and FLOPs it adds to one mixture
layer, and what it refuses. The mixture's counts (the `moe` row of
`zoo.config.facts.ffn.FFN_FACTS`) add `shared_gate_parameters` and `shared_gate_flops`;
`ModelConfig` runs `check_shared_gate`; `zoo.nn.moe.MoE` builds the gate.

Qwen1.5-MoE, Qwen2-MoE and Qwen3-Next (transformers' `Qwen3NextSparseMoeBlock`) scale the shared
experts' output by a scalar sigmoid gate per token before adding it to the routed experts':

    y = Σ_e g_e(x) · FFN_e(x) + sigmoid(x · w_s) · FFN_shared(x),   w_s ∈ R^D,

the gate one linear map D -> 1 without bias (`shared_expert_gate`), so that a token can lean on
the routed experts or on the shared ones. DeepSeekMoE's shared experts (the default, `none`)
add their output as it is."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig


class MoESharedGate(Choice):
    none = "none"  # the shared experts' output added as it is (DeepSeekMoE)
    sigmoid = "sigmoid"  # scaled by sigmoid(x · w_s), one scalar per token (Qwen2-MoE, Qwen3-Next)


def _no_gate(cfg: ModelConfig) -> int:
    return 0


def _one_row(cfg: ModelConfig) -> int:
    """w_s: one D-vector (a D -> 1 linear map without bias)."""
    return cfg.d_model


def _one_row_flops(cfg: ModelConfig) -> int:
    """x · w_s for one token: 2 per weight (the sigmoid and the product are not matrix multiplies)."""
    return 2 * cfg.d_model


def _refuses_nothing(cfg: ModelConfig) -> str | None:
    return None


def _sigmoid_refuses(cfg: ModelConfig) -> str | None:
    """It gates the shared experts: a mixture must have some."""
    if cfg.moe_shared < 1:
        return (
            f"model.moe_shared_gate=sigmoid gates the shared experts, and model.moe_shared={cfg.moe_shared}: "
            "set model.moe_shared >= 1"
        )
    return None


@dataclass(frozen=True, kw_only=True)
class SharedGateFacts:
    """One shared-expert gate's row.

    - `what`: what it does to the shared experts' output; `paper`: where it comes from.
    - `parameters(cfg)`: the parameters it adds to one mixture layer (constant in the experts'
      width, so `model.param_budget` still solves for it linearly).
    - `flops(cfg)`: the matrix-multiply FLOPs it adds per token and mixture layer.
    - `refuses`: the one-line refusal of a mixture it cannot serve, None where it serves it.
    """

    what: str
    paper: str
    parameters: Callable[[ModelConfig], int] = _no_gate
    flops: Callable[[ModelConfig], int] = _no_gate
    refuses: Callable[[ModelConfig], str | None] = _refuses_nothing


SHARED_GATE_FACTS: dict[MoESharedGate, SharedGateFacts] = {
    MoESharedGate.none: SharedGateFacts(
        what="the shared experts' output added to the routed experts' as it is",
        paper="Dai et al. 2024 (DeepSeekMoE)",
    ),
    MoESharedGate.sigmoid: SharedGateFacts(
        what="the shared experts' output times sigmoid(x · w_s), one scalar per token, w_s a D-vector",
        paper="Qwen team 2024 (Qwen1.5-MoE, Qwen2-MoE); Qwen team 2025 (Qwen3-Next; transformers' "
        "Qwen3NextSparseMoeBlock.shared_expert_gate)",
        parameters=_one_row,
        flops=_one_row_flops,
        refuses=_sigmoid_refuses,
    ),
}


def shared_gate_kind(cfg: ModelConfig) -> MoESharedGate:
    """`cfg`'s model.moe_shared_gate as its kind (an unknown one refused naming the kinds)."""
    return MoESharedGate.parse(cfg.moe_shared_gate, "model.moe_shared_gate")


def shared_gate_parameters(cfg: ModelConfig) -> int:
    """The parameters the gate adds to one mixture layer of `cfg`."""
    return SHARED_GATE_FACTS[shared_gate_kind(cfg)].parameters(cfg)


def shared_gate_flops(cfg: ModelConfig) -> int:
    """The matrix-multiply FLOPs the gate adds per token to one mixture layer of `cfg`."""
    return SHARED_GATE_FACTS[shared_gate_kind(cfg)].flops(cfg)


def check_shared_gate(cfg: ModelConfig) -> dict[str, Choice]:
    """model.moe_shared_gate read as its kind, for the schema to settle; refused where the
    mixture is off (it would be read by nothing) or its row refuses the config."""
    kind = shared_gate_kind(cfg)
    if kind != MoESharedGate.none and cfg.ffn.value != "moe":
        raise ConfigError(f"model.moe_shared_gate={kind.value} only applies to model.ffn=moe, not {cfg.ffn.value}")
    refusal = SHARED_GATE_FACTS[kind].refuses(cfg) if cfg.ffn.value == "moe" else None
    if refusal is not None:
        raise ConfigError(refusal)
    return {"moe_shared_gate": kind}
