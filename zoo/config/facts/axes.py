"""Every ablation axis, one entry each: the registry the contract tests (`tests/contract/`)
are parametrized over, so that a new kind of any axis is built, counted, planned and resumed
as soon as its row exists, and a new axis as soon as its entry does.

An entry (`Axis`) holds:

- `key`: the config key that picks a kind, e.g. "model.norm_type" or "optim.kind";
- `kinds`: its `Choice` enum (every member is a kind the tests cover);
- `facts`: its torch-free table {kind: row} (None where the axis has no table yet: then the
  tests cover its kinds but no row);
- `overrides(kind)`: the settings that select `kind`, as {dotted config key: plain value}. Keys
  under "model." set a model config (tests/conftest.py's `tiny(...)` takes them: `model.position.kind`
  sets `position={"kind": ...}`); every key is also a `zoo-train` override `key=value` (the
  run-level keys of optim and scheduler axes go there only). Add the other keys a kind needs
  (e.g. a window for sliding attention). The default sets `key` alone.

To register an axis, append ONE entry at the end of `AXES`: `Axis(key, Enum, TABLE)`, with
`overrides=` where selecting a kind takes more than its key. Torch-free, like every table here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zoo.config.choice import Choice
from zoo.config.facts.activations import ACTIVATION_FACTS, Activation
from zoo.config.facts.attention import ATTENTION_FACTS, AttentionKind
from zoo.config.facts.blocks import BLOCK_FACTS, QK_NORM_FACTS, BlockKind, QKNorm
from zoo.config.facts.families import FAMILY_FACTS, Family
from zoo.config.facts.ffn import FFN_FACTS, FFNKind
from zoo.config.facts.heads import GATE_FACTS, SINK_FACTS, AttnGate, AttnSink
from zoo.config.facts.kv import KV_FACTS, KVKind
from zoo.config.facts.moe_experts import EXPERT_FACTS, MoEExpert
from zoo.config.facts.moe_routing import BALANCE_FACTS, MoEBalance
from zoo.config.facts.moe_shared import SHARED_GATE_FACTS, MoESharedGate
from zoo.config.facts.muon import MUON_VARIANTS, NS_METHODS, MuonVariant, NsMethod
from zoo.config.facts.norms import NORM_FACTS, NormType
from zoo.config.facts.optimizers import OPTIMIZER_FACTS, OptimizerKind
from zoo.config.facts.placements import PLACEMENT_FACTS, NormPlacement
from zoo.config.facts.positions import POSITION_FACTS, PositionKind
from zoo.config.facts.residuals import HYPER_FACTS, VALUE_RESIDUAL_FACTS, HyperConnections, ValueResidual
from zoo.config.facts.rope import SCALING_FACTS, RopeScaling
from zoo.config.facts.schedules import SCHEDULE_FACTS, ScheduleKind
from zoo.config.facts.tasks import TASK_SPECS, TaskKind, families_of
from zoo.config.facts.tokenizers import TOKENIZER_FACTS, TokenizerKind


@dataclass(frozen=True)
class Axis:
    """One ablation axis (see the module docstring)."""

    key: str
    kinds: type[Choice]
    facts: Mapping[Any, Any] | None  # keyed by `kinds`: a Mapping is invariant in its key
    overrides: Callable[[Any], dict[str, Any]] | None = field(default=None, compare=False)  # of a `kinds` member

    def settings(self, kind: Choice | str) -> dict[str, Any]:
        """{dotted config key: plain value} that selects `kind` of this axis."""
        kind = self.kinds.parse(kind, self.key)
        return dict(self.overrides(kind)) if self.overrides is not None else {self.key: kind.value}

    @property
    def model_level(self) -> bool:
        """The axis is a model config key (a built model differs between its kinds)."""
        return self.key.startswith("model.")

    @property
    def run_level(self) -> bool:
        """The axis is a run's setting (optimizer, schedule, task, tokenizer), not the model's."""
        return not self.model_level


def _family(kind: Family) -> dict[str, Any]:
    """A family, with a decoder depth where it has cross-attention."""
    out: dict[str, Any] = {"model.family": kind.value}
    if FAMILY_FACTS[kind].cross_attention:
        out["model.n_decoder_layers"] = 2
    return out


def _attention(kind: AttentionKind) -> dict[str, Any]:
    """An attention variant, a sliding one with local and global layers (Gemma 2's pattern) and
    a window of 33: odd (an encoder's band is symmetric) and past the contract tests' context
    (32), where FlopCounterMode counts the whole square a boolean-masked SDPA computes, so that
    the rows' FLOPs (which count the band) meet the measured ones; the band itself is checked in
    tests/nn/test_sliding_window.py. A recurrent kind in Qwen3-Next's hybrid at its smallest: two
    layers, the second full attention (global_every=2); Mamba 2 with heads of 8, a state of 8 and
    chunks of 8 (the contract's context of 32 is four chunks: the state passes between them)."""
    if kind == AttentionKind.full:
        return {"model.attention": kind.value}
    if ATTENTION_FACTS[kind].recurrent:
        out = {"model.attention": kind.value, "model.global_every": 2, "model.n_layers": 2}
        if kind == AttentionKind.mamba2:
            out.update({"model.ssm_head_dim": 8, "model.ssm_state": 8, "model.ssm_chunk": 8})
        return out
    # two layers: one sliding, one global (global_every past the depth is refused)
    return {"model.attention": kind.value, "model.window": 33, "model.global_every": 2, "model.n_layers": 2}


def _ffn(kind: FFNKind) -> dict[str, Any]:
    """A feed-forward kind; a mixture small enough for the tiny configs (4 experts, top-2, one
    shared expert, 8 wide) and without biases (it holds none)."""
    if kind == FFNKind.dense:
        return {"model.ffn": kind.value}
    return {
        "model.ffn": kind.value,
        "model.moe_experts": 4,
        "model.moe_top_k": 2,
        "model.moe_shared": 1,
        "model.moe_d_ff": 8,
        "model.bias": False,
    }


def _kv(kind: KVKind) -> dict[str, Any]:
    """Where keys and values come from; the latent kind under RoPE (its decoupled key rotates),
    with queries through their own latent and every width its own (d_n 8, d_r 4, d_v 6, r 12,
    r_q 10), so that a width counted in the wrong place shows."""
    if kind == KVKind.heads:
        return {"model.kv": kind.value}
    return {
        "model.kv": kind.value,
        "model.position.kind": PositionKind.rope.value,
        "model.q_lora_rank": 10,
        "model.kv_lora_rank": 12,
        "model.qk_nope_head_dim": 8,
        "model.qk_rope_head_dim": 4,
        "model.v_head_dim": 6,
    }


def _moe_balance(kind: MoEBalance) -> dict[str, Any]:
    """A way of balancing a mixture's load, on the ffn axis's tiny mixture (4 experts, top-2);
    aux_loss, the default, as it is (the model.ffn axis's mixture covers it)."""
    if kind == MoEBalance.aux_loss:
        return {"model.moe_balance": kind.value}
    return {**_ffn(FFNKind.moe), "model.moe_balance": kind.value}


def _moe_expert(kind: MoEExpert) -> dict[str, Any]:
    """An expert kind: plain, the default, as it is (the model.ffn axis covers its mixture);
    gpt_oss in `_ffn`'s small mixture without shared experts, with its SwiGLU and the attention
    biases gpt-oss has (model.bias)."""
    if kind == MoEExpert.plain:
        return {"model.moe_expert": kind.value}
    return {
        **_ffn(FFNKind.moe),
        "model.moe_shared": 0,
        "model.moe_expert": kind.value,
        "model.activation": "swiglu",
        "model.bias": True,
    }


def _rope_scaling(kind: RopeScaling) -> dict[str, Any]:
    """A RoPE context-extension rule at factor 4, over an original length of 8 where the rule
    reads one (past it, within the contract tests' context of 32, the rule changes the angles)."""
    out: dict[str, Any] = {
        "model.position.kind": "rope",
        "model.position.scaling": kind.value,
        "model.position.scale": 4.0,
    }
    if "original_max_seq_len" in SCALING_FACTS[kind].params:
        out["model.position.original_max_seq_len"] = 8
    return out


def _task(kind: TaskKind) -> dict[str, Any]:
    """A training objective, with the first family that trains it (a masked LM's encoder)."""
    return {"task.kind": kind.value, "model.family": families_of(kind)[0].value}


def _value_residual(kind: ValueResidual) -> dict[str, Any]:
    """A value residual, in two layers (one to mix with: one layer is refused)."""
    if kind == ValueResidual.none:
        return {"model.value_residual": kind.value}
    return {"model.value_residual": kind.value, "model.n_layers": 2}


def _hyper(kind: HyperConnections) -> dict[str, Any]:
    """Hyper-connections over two streams (the fewest that are not the plain residual)."""
    if kind == HyperConnections.none:
        return {"model.hyper_connections": kind.value}
    return {"model.hyper_connections": kind.value, "model.residual_streams": 2}


def _moe_shared_gate(kind: MoESharedGate) -> dict[str, Any]:
    """A gate on the shared experts: none, the default, as it is (the model.ffn axis's mixture
    covers it); sigmoid on `_ffn`'s small mixture, whose one shared expert it gates."""
    if kind == MoESharedGate.none:
        return {"model.moe_shared_gate": kind.value}
    return {**_ffn(FFNKind.moe), "model.moe_shared_gate": kind.value}


def _muon_variant(kind: MuonVariant) -> dict[str, Any]:
    """A variant of Muon's update, under optim=muon."""
    return {"optim.kind": "muon", "optim.muon_variant": kind.value}


def _ns_method(kind: NsMethod) -> dict[str, Any]:
    """Muon's orthogonalising iteration, under optim=muon."""
    return {"optim.kind": "muon", "optim.ns_method": kind.value}


AXES: list[Axis] = [
    Axis("model.family", Family, FAMILY_FACTS, overrides=_family),
    Axis("model.position.kind", PositionKind, POSITION_FACTS),
    Axis("model.norm", NormPlacement, PLACEMENT_FACTS),
    Axis("model.norm_type", NormType, NORM_FACTS),
    Axis("model.activation", Activation, ACTIVATION_FACTS),
    Axis("model.ffn", FFNKind, FFN_FACTS, overrides=_ffn),
    Axis("model.attention", AttentionKind, ATTENTION_FACTS, overrides=_attention),
    Axis("optim.kind", OptimizerKind, OPTIMIZER_FACTS),
    Axis("scheduler.kind", ScheduleKind, SCHEDULE_FACTS),
    Axis("model.block", BlockKind, BLOCK_FACTS),
    Axis("model.qk_norm", QKNorm, QK_NORM_FACTS),
    Axis("task.kind", TaskKind, TASK_SPECS, overrides=_task),
    Axis("tokenizer.kind", TokenizerKind, TOKENIZER_FACTS),
    Axis("model.kv", KVKind, KV_FACTS, overrides=_kv),
    Axis("model.moe_balance", MoEBalance, BALANCE_FACTS, overrides=_moe_balance),
    Axis("model.attn_sink", AttnSink, SINK_FACTS),
    Axis("model.attn_gate", AttnGate, GATE_FACTS),
    Axis("model.moe_expert", MoEExpert, EXPERT_FACTS, overrides=_moe_expert),
    Axis("model.value_residual", ValueResidual, VALUE_RESIDUAL_FACTS, overrides=_value_residual),
    Axis("model.hyper_connections", HyperConnections, HYPER_FACTS, overrides=_hyper),
    Axis("model.position.scaling", RopeScaling, SCALING_FACTS, overrides=_rope_scaling),
    Axis("model.moe_shared_gate", MoESharedGate, SHARED_GATE_FACTS, overrides=_moe_shared_gate),
    Axis("optim.muon_variant", MuonVariant, MUON_VARIANTS, overrides=_muon_variant),
    Axis("optim.ns_method", NsMethod, NS_METHODS, overrides=_ns_method),
]


def axis(key: str) -> Axis:
    """The entry of `key` (KeyError naming the registered keys otherwise)."""
    for entry in AXES:
        if entry.key == key:
            return entry
    raise KeyError(f"no axis {key!r}; registered: {', '.join(a.key for a in AXES)}")


def axis_kinds() -> list[tuple[Axis, Choice]]:
    """Every (axis, kind) pair, in registry and enum order: what the contract tests cover."""
    return [(entry, kind) for entry in AXES for kind in entry.kinds]


def model_overrides(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The model part of `settings` as keyword arguments of `ModelConfig` (and of
    tests/conftest.py's `tiny`): "model.x" -> x, "model.position.y" -> position={"y": ...}."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if not key.startswith("model."):
            continue
        path = key.split(".")[1:]
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return out


def cli_overrides(settings: Mapping[str, Any]) -> list[str]:
    """`settings` as zoo-train overrides key=value (None as null, booleans lower case)."""

    def plain(value: Any) -> str:
        if value is None:
            return "null"
        if isinstance(value, bool):
            return str(value).lower()
        return str(value)

    return [f"{key}={plain(value)}" for key, value in settings.items()]
