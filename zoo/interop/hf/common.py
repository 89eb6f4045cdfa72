"""What every converter shares: the error, strict state-dict loading, and field checks."""

from __future__ import annotations

from typing import Any

import torch

from zoo.config.errors import ZooError
from zoo.config.facts.mamba2 import SSM_DEFAULTS
from zoo.config.facts.moe_routing import MoEBalance
from zoo.config.facts.rope import RopeScaling


class UnsupportedConfig(ZooError, ValueError):
    """A Hugging Face config (or zoo composition) the converter cannot reproduce exactly."""


def require(config: Any, field: str, allowed, why: str = "") -> None:
    """UnsupportedConfig unless `config.field` is one of `allowed` (missing counts as None)."""
    value = getattr(config, field, None)
    values = allowed if isinstance(allowed, (list, tuple, set)) else (allowed,)
    if value not in values:
        shown = ", ".join(repr(v) for v in values)
        raise UnsupportedConfig(
            f"{type(config).__name__}.{field}={value!r} is not supported "
            f"(supported: {shown}){'; ' + why if why else ''}"
        )


def load_exact(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Load every parameter of `module` from `state`, nothing missing, nothing left over
    (persistent buffers that carry no weights are kept)."""
    own = dict(module.state_dict())
    missing = [k for k in own if k not in state and "." + k.rsplit(".", 1)[-1] != ".inv_freq"]
    extra = [k for k in state if k not in own]
    if missing or extra:
        raise UnsupportedConfig(f"weights do not line up: missing {missing[:5]}, unexpected {extra[:5]}")
    for key, value in state.items():
        if own[key].shape != value.shape:
            raise UnsupportedConfig(f"{key}: shape {tuple(value.shape)}, expected {tuple(own[key].shape)}")
    module.load_state_dict({**own, **state}, strict=True)


# transformers' activation names -> zoo's, and back, for the families with a plain feed-forward unit
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "relu": "relu"}
ACTIVATIONS_LISTED = "/".join(HF_ACTIVATIONS)  # as a family's description names them

ANY = object()  # an option value a family reproduces whatever it is

# options a family reproduces only at these values unless its converter says otherwise; a
# composition that sets one elsewhere matches no family (it would export as a different model)
OPTIONS = {
    "scale_embeddings": (False,),
    "embed_norm": (False,),
    "token_types": (0,),
    "attention_scale": (None,),
    "head_transform": (False,),
    "scale_output": (False,),
    "output_bias": (False,),
    "offset": (0,),
    "parametrization": ("standard",),  # μP's multipliers have no Hugging Face equivalent
    # the block options, at their defaults: a family that reproduces one says so in its converter
    "block": ("sequential",),
    "qk_norm": ("none",),
    "qk_norm_type": (None,),
    "attn_softcap": (None,),
    "final_softcap": (None,),
    "attention": ("full",),
    "window": (None,),
    "global_every": (None,),
    "ffn": ("dense",),  # a kind of FFN the families have not (a mixture of experts) exports as none of them
    # the mixture's keys at their defaults (set elsewhere only with model.ffn=moe); the budget's count reads no weight
    "moe_experts": (8,),
    "moe_top_k": (2,),
    "moe_d_ff": (None,),
    "moe_shared": (0,),
    "moe_gate": ("softmax",),
    "moe_renorm": (True,),
    "moe_capacity": (None,),
    "moe_every": (1,),
    "param_budget_counts": ("total", "active"),
    # per-head keys and values; the latent widths (set only with model.kv=latent)
    "kv": ("heads",),
    "q_lora_rank": (None,),
    "kv_lora_rank": (None,),
    "qk_nope_head_dim": (None,),
    "qk_rope_head_dim": (None,),
    "v_head_dim": (None,),
    # moe balancing and DeepSeek-V3's routing: no family here has a selection bias (its weights would be
    # dropped) or grouped routing; the other balancing kinds differ in training only
    "moe_balance": tuple(kind.value for kind in MoEBalance if kind != MoEBalance.bias),
    "moe_bias_rate": (0.001,),
    "moe_groups": (1,),
    "moe_top_groups": (1,),
    "moe_scale": (1.0,),
    "moe_first_dense": (0,),
    # the attention sink and output gate (zoo.config.facts.heads), off
    "attn_sink": ("none",),
    "attn_gate": ("none",),
    "moe_expert": ("plain",),  # the mixtures' experts without biases (gpt-oss's: zoo.interop.hf.gpt_oss)
    # value residual, value embeddings, hyper-connections: no family has them
    "value_residual": ("none",),
    "value_embeds": (0,),
    "hyper_connections": ("none",),
    "residual_streams": (None, 1),  # None: derived, 1 with model.hyper_connections=none
    # RoPE's per-layer pattern and partial rotation (model.position.*), at their defaults
    "rotary_fraction": (1.0,),
    "nope_every": (None,),
    "theta_local": (None,),
    # the gate on a mixture's shared experts, off (Qwen3-Next's: zoo.interop.hf.qwen3next)
    "moe_shared_gate": ("none",),
    # Mamba 2's widths (zoo.config.facts.mamba2), at their defaults but in Bamba (zoo.interop.hf.bamba)
    **{name: (default,) for name, default in SSM_DEFAULTS.items()},
    # recurrent layers and layer patterns (zoo.config.facts.attention, zoo.config.facts.gated_deltanet): none here
    "layer_pattern": (None,),
    "linear_key_heads": (None,),
    "linear_value_heads": (None,),
    "linear_key_dim": (None,),
    "linear_value_dim": (None,),
    "conv_kernel": (4,),
}
# the OPTIONS that are fields of model.position
POSITION_OPTIONS = ("offset", "rotary_fraction", "nope_every", "theta_local")


def composed_as(cfg, options: dict | None = None, **choices) -> bool:
    """Does a zoo ModelConfig make these choices? `position` is the scheme's kind; a tuple
    allows several values: `composed_as(cfg, family="decoder_only", activation=("gelu", "relu"))`.
    Every option of `OPTIONS` must also hold one of its values there, or in `options`
    (a tuple of allowed values, or ANY)."""
    made = {
        "family": cfg.family,
        "position": cfg.position.kind,
        "norm": cfg.norm,
        "norm_type": cfg.norm_type,
        "activation": cfg.activation,
    }
    if not all(made[key].value in (value if isinstance(value, tuple) else (value,)) for key, value in choices.items()):
        return False
    allowed = {**OPTIONS, **(options or {})}
    values = {key: getattr(cfg.position if key in POSITION_OPTIONS else cfg, key) for key in allowed}
    return all(allowed[key] is ANY or values[key] in allowed[key] for key in allowed) and exported_rope(cfg)


def rope_of(config) -> tuple[float, float]:
    """(theta, linear scale) of a transformers config's RoPE (`rope_parameters`, or the older
    `rope_scaling` / `rope_theta`), over the whole head (`partial_rotary_factor` 1.0, as the
    families but GPT-NeoX rotate); UnsupportedConfig otherwise (`rope_position` reads the other
    rules and, for GPT-NeoX, the fraction)."""
    params = dict(getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {})
    fraction = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None))
    if fraction not in (1.0, None):
        raise UnsupportedConfig(
            f"{type(config).__name__}.partial_rotary_factor={fraction} is not supported "
            f"(supported: 1.0; this family's transformers model rotates whole heads)"
        )
    theta = params.get("rope_theta", getattr(config, "rope_theta", None) or 10000.0)
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "default":
        return float(theta), 1.0
    if kind == "linear":
        return float(theta), float(params["factor"])
    raise UnsupportedConfig(
        f"{type(config).__name__}.rope_parameters rope_type={kind!r} is not supported (supported: 'default', 'linear')"
    )


# transformers' rope_type of each rule it shares with zoo (it has no static NTK rule)
HF_ROPE_TYPES = ("default", *(kind.value for kind in RopeScaling if kind != RopeScaling.ntk))


def rope_position(config, *, partial: bool = False) -> dict:
    """zoo's `model.position` of a transformers config's RoPE: its base and its scaling rule
    (default, linear or yarn, as `zoo.config.facts.rope.SCALING_FACTS` defines them) with the
    rule's parameters; with `partial`, `partial_rotary_factor` as model.position.rotary_fraction
    (for a family whose transformers model rotates part of each head). UnsupportedConfig for a
    rule or parameter zoo does not reproduce."""
    name = type(config).__name__
    params = dict(getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {})
    fraction = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None))
    if fraction not in (1.0, None) and not partial:
        rope_of(config)  # refuses the fraction, naming it
    position: dict[str, Any] = {"kind": "rope"}
    position["theta"] = float(params.get("rope_theta", getattr(config, "rope_theta", None) or 10000.0))
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "linear":
        position["scale"] = float(params["factor"])
    elif kind == "dynamic":  # its original length is max_position_embeddings: zoo's model.max_seq_len
        position.update(scale=float(params["factor"]), scaling="dynamic")
    elif kind == "yarn":
        for key in ("mscale", "mscale_all_dim"):
            if params.get(key):
                raise UnsupportedConfig(
                    f"{name}.rope_parameters {key}={params[key]} is not supported (supported: none)"
                )
        if params.get("truncate", True) is not True or params.get("factor") is None:
            raise UnsupportedConfig(
                f"{name}.rope_parameters truncate={params.get('truncate')} factor={params.get('factor')} "
                f"is not supported (supported: truncate true, a factor given)"
            )
        position.update(
            scale=float(params["factor"]),
            scaling="yarn",
            original_max_seq_len=int(params["original_max_position_embeddings"]),
            beta_fast=float(params.get("beta_fast") or 32.0),
            beta_slow=float(params.get("beta_slow") or 1.0),
            attention_factor=params.get("attention_factor"),
        )
    elif kind != "default":
        raise UnsupportedConfig(
            f"{name}.rope_parameters rope_type={kind!r} is not supported "
            f"(supported: {', '.join(repr(k) for k in HF_ROPE_TYPES)})"
        )
    if fraction not in (1.0, None):
        position["rotary_fraction"] = float(fraction)
    return position


def hf_rope(position, max_seq_len: int | None = None) -> dict:
    """transformers' `rope_parameters` of a zoo RoPE `position` config (the inverse of
    `rope_of` / `rope_position`); `max_seq_len`: the model's, YaRN's original length when the
    config names none. A rule transformers has not (`exported_rope` is False) matches no family."""
    scaling = getattr(position.scaling, "value", position.scaling)
    if scaling == "yarn" and position.scale != 1.0:
        original = position.original_max_seq_len if position.original_max_seq_len is not None else max_seq_len
        return {
            "rope_type": "yarn",
            "rope_theta": position.theta,
            "factor": position.scale,
            "original_max_position_embeddings": original,
            "beta_fast": position.beta_fast,
            "beta_slow": position.beta_slow,
            "attention_factor": position.attention_factor,
        }
    if scaling == "dynamic" and position.scale != 1.0:
        return {"rope_type": "dynamic", "rope_theta": position.theta, "factor": position.scale}
    if position.scale != 1.0:
        return {"rope_type": "linear", "rope_theta": position.theta, "factor": position.scale}
    return {"rope_type": "default", "rope_theta": position.theta}


def exported_rope(cfg) -> bool:
    """Does transformers have `cfg`'s RoPE scaling rule? Not static NTK (its dynamic rule grows
    the base with each forward's length), and dynamic only from model.max_seq_len (its
    max_position_embeddings is the original length)."""
    p = cfg.position
    scaling = getattr(p.scaling, "value", p.scaling)
    if p.scale == 1.0:
        return True
    if scaling == "ntk":
        return False
    return scaling != "dynamic" or p.original_max_seq_len in (None, cfg.max_seq_len)


def tied(hf_model) -> bool:
    """Does `hf_model` share its output projection with its input embedding? Read from the
    tensors, not the config: transformers 5 reports `tie_word_embeddings=True` for every T5."""
    out = hf_model.get_output_embeddings()
    return out is not None and out.weight.data_ptr() == hf_model.get_input_embeddings().weight.data_ptr()


def untie(hf_model) -> None:
    """Give `hf_model` an output projection of its own (a copy), for zoo models with
    `tie_embeddings=false` whose transformers class ties regardless of its config."""
    out = hf_model.get_output_embeddings()
    if tied(hf_model):
        out.weight = torch.nn.Parameter(out.weight.detach().clone())
