"""Facts about the kinds of expert a mixture of experts holds (`model.moe_expert`), in one
torch-free table: what one expert computes, where it comes from, the biases it adds to the
router and the experts, how they start, and what it refuses. The mixture's parameter count (the
`moe` row of `zoo.config.facts.ffn.FFN_FACTS`) adds `expert_bias_parameters`; `ModelConfig` runs
`check_expert`; `zoo.nn.gpt_oss_experts` builds the gpt_oss kind, `zoo.nn.moe` the plain one.

gpt-oss's experts (OpenAI 2025, transformers' `GptOssExperts`): the router's logits have a bias,
each expert's two projections have biases, and the gated unit is a clamped SwiGLU,

    g = min(x W_gate + b_gate, limit),  u = clip(x W_up + b_up, -limit, limit),
    h = (u + 1) · g · sigmoid(alpha · g),  out = h W_down + b_down,

with alpha = 1.702 and limit = 7.0. Its router picks the top k logits and takes the softmax over
those k alone, which is the softmax over all E renormalised over the top k: zoo's
`model.moe_gate=softmax model.moe_renorm=true`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.facts.activations import ACTIVATION_FACTS
from zoo.config.facts.starts import NORMAL, ZEROS, Starts

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig

SWIGLU_ALPHA = 1.702  # gpt-oss: the sigmoid's gain in its clamped SwiGLU (swiglu_alpha)
SWIGLU_LIMIT = 7.0  # gpt-oss: the clamp of the gate (above) and the up projection (both sides) (swiglu_limit)


class MoEExpert(Choice):
    plain = "plain"  # experts without biases computing model.activation (Mixtral, OLMoE, Qwen3-MoE)
    gpt_oss = "gpt_oss"  # router and experts with biases, the clamped SwiGLU (gpt-oss)


def _refuses_nothing(cfg: ModelConfig) -> str | None:
    return None


def _gpt_oss_refuses(cfg: ModelConfig) -> str | None:
    """Its unit is a SwiGLU, its router a softmax renormalised over the top k."""
    if cfg.activation.value != "swiglu":
        return (
            f"model.moe_expert=gpt_oss computes gpt-oss's clamped SwiGLU, not model.activation="
            f"{cfg.activation.value}: set model.activation=swiglu"
        )
    if str(cfg.moe_gate) != "softmax" or cfg.moe_renorm is not True:
        return (
            "model.moe_expert=gpt_oss routes as gpt-oss (the softmax over the top-k logits): set "
            "model.moe_gate=softmax model.moe_renorm=true"
        )
    return None


@dataclass(frozen=True, kw_only=True)
class ExpertFacts:
    """One expert kind's row.

    - `what`: what one expert computes; `paper`: where it comes from.
    - `biases`: the router's logits (E) and each routed expert's projections (2·F and D) have
      biases, whatever model.bias says (the shared experts and dense layers follow model.bias).
    - `starts`: how the expert parameters it adds start, by name (`zoo.config.facts.starts`).
    - `refuses`: the one-line refusal of a model config it cannot serve, None where it serves it.
    """

    what: str
    paper: str
    biases: bool = False
    starts: Starts = field(default_factory=dict, compare=False)
    refuses: Callable[[ModelConfig], str | None] = _refuses_nothing


EXPERT_FACTS: dict[MoEExpert, ExpertFacts] = {
    MoEExpert.plain: ExpertFacts(
        what="W_out · act(W_in · x), gated W_out · (act(W_gate · x) ⊙ W_up · x), no biases",
        paper="Shazeer et al. 2017; Jiang et al. 2024 (Mixtral)",
    ),
    MoEExpert.gpt_oss: ExpertFacts(
        what=f"(clip(x W_up + b_up, ±{SWIGLU_LIMIT:g}) + 1) · g · sigmoid({SWIGLU_ALPHA:g} g), g = min(x W_gate + "
        f"b_gate, {SWIGLU_LIMIT:g}), then W_down + b_down; a bias on the router's logits",
        paper="OpenAI 2025 (gpt-oss-120b & gpt-oss-20b model card; transformers' GptOssExperts)",
        biases=True,
        starts={"w_in": NORMAL, "w_out": NORMAL, "b_in": ZEROS, "b_out": ZEROS},
        refuses=_gpt_oss_refuses,
    ),
}


def expert_kind(cfg: ModelConfig) -> MoEExpert:
    """`cfg`'s model.moe_expert as its kind (an unknown one refused naming the kinds)."""
    return MoEExpert.parse(cfg.moe_expert, "model.moe_expert")


def expert_bias_parameters(cfg: ModelConfig, width: int, experts: int) -> int:
    """The biases a mixture of `experts` routed experts, each `width` wide, adds: the router's E
    and each expert's 2·F (gated; F plain) and D, where its kind has biases."""
    if not EXPERT_FACTS[expert_kind(cfg)].biases:
        return 0
    inner = 2 * width if ACTIVATION_FACTS[cfg.activation].gated else width
    return cfg.moe_experts + experts * (inner + cfg.d_model)


def check_expert(cfg: ModelConfig) -> dict[str, Choice]:
    """model.moe_expert read as its kind, for the schema to settle; refused where the mixture is
    off (it would be read by nothing) or its row refuses the config."""
    kind = expert_kind(cfg)
    if kind != MoEExpert.plain and cfg.ffn.value != "moe":
        raise ConfigError(f"model.moe_expert={kind.value} only applies to model.ffn=moe, not {cfg.ffn.value}")
    refusal = EXPERT_FACTS[kind].refuses(cfg) if cfg.ffn.value == "moe" else None
    if refusal is not None:
        raise ConfigError(refusal)
    return {"moe_expert": kind}
