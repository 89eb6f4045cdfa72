"""Facts about RoPE's options beyond its base: the context-extension rules of
`model.position.scaling` (one row each: what it is, its paper, the `PositionConfig` fields it
reads), and the per-layer patterns (NoPE every k-th layer, a local base for sliding layers,
partial rotation) with their checks. Torch-free; the frequencies themselves are computed by
`zoo.nn.position.extension` as transformers' `modeling_rope_utils` computes them."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.facts.attention import layer_window
from zoo.config.facts.layers import stack_depths

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig, PositionConfig


class RopeScaling(Choice):
    """How RoPE's frequencies stretch to a context past the training length, by the factor
    `model.position.scale` (1: none, every rule is plain RoPE)."""

    linear = "linear"  # position interpolation
    ntk = "ntk"  # NTK-aware: a larger base
    dynamic = "dynamic"  # NTK-aware, its base grown with the length of each forward
    yarn = "yarn"  # NTK-by-parts + attention temperature


@dataclass(frozen=True)
class ScalingFacts:
    """One rule's row.

    - `what`: the rule in a line;
    - `paper`: where it comes from;
    - `params`: the `PositionConfig` fields it reads; one set away from its default under another
      rule is refused (`check_scaling`);
    - `transformers`: the `rope_type` of transformers' `rope_parameters` it equals, None where
      transformers has none (parity: tests/nn/test_rope_options.py compares inv_freq, the
      attention factor and cos/sin).
    - `per_forward`: its frequencies follow the positions of each forward, so a KV cache keeps
      keys unrotated and every step rotates them all (cached decoding stays equal to uncached).
    None of the rules adds a parameter, a FLOP or a cached byte: they change buffers only, so a
    trained checkpoint takes another rule at evaluation (`zoo-eval`, `zoo-generate`).
    """

    what: str
    paper: str
    params: tuple[str, ...]
    transformers: str | None
    per_forward: bool = False


SCALING_FACTS: dict[RopeScaling, ScalingFacts] = {
    RopeScaling.linear: ScalingFacts(
        what="positions divided by the factor (every frequency divided by it)",
        paper="Chen et al. 2023, Position Interpolation",
        params=("scale",),
        transformers="linear",
    ),
    RopeScaling.ntk: ScalingFacts(
        what="the base raised to theta·factor^(d/(d-2)): low frequencies interpolated, high ones kept",
        paper="bloc97 2023, NTK-aware scaled RoPE (YaRN paper eq. 16); transformers has it only as the "
        "dynamic rule's base at length original·(2·factor - 1)/factor",
        params=("scale",),
        transformers=None,
    ),
    RopeScaling.dynamic: ScalingFacts(
        what="NTK-aware with the base theta·(factor·L/original - factor + 1)^(d/(d-2)) at a forward's "
        "length L = its largest position + 1 (plain RoPE up to the original length)",
        paper="emozilla 2023, Dynamically Scaled RoPE; transformers' dynamic rule",
        params=("scale", "original_max_seq_len"),
        transformers="dynamic",
        per_forward=True,
    ),
    RopeScaling.yarn: ScalingFacts(
        what="NTK-by-parts: frequencies ramped between interpolated and kept by their rotations "
        "over the original length (beta_slow..beta_fast), and cos/sin scaled by 0.1·ln(factor) + 1",
        paper="Peng et al. 2024, YaRN",
        params=("scale", "original_max_seq_len", "beta_fast", "beta_slow", "attention_factor"),
        transformers="yarn",
    ),
}

# every PositionConfig field of the rules: what RoPE reads besides theta and its layer pattern
SCALING_PARAMS = ("scaling", "original_max_seq_len", "beta_fast", "beta_slow", "attention_factor")
# the keys a trained checkpoint may change when it is run (zoo-eval, zoo-generate) or fine-tuned
RUN_TIME_KEYS = ("scale", *SCALING_PARAMS)
# RoPE's per-layer pattern: what the stack reads to build each layer's scheme
LAYER_PARAMS = ("nope_every", "theta_local")


def check_scaling(position: PositionConfig) -> None:
    """Refuse a rule's field set under another rule, and values no rule can use."""
    rule = SCALING_FACTS[position.scaling]
    for f in fields(position):
        if f.name in SCALING_PARAMS[1:] and f.name not in rule.params:
            if getattr(position, f.name) != f.default:
                owners = " or ".join(r.value for r, facts in SCALING_FACTS.items() if f.name in facts.params)
                raise ConfigError(
                    f"model.position.{f.name} only applies to model.position.scaling={owners}, "
                    f"not {position.scaling.value}"
                )
    if position.original_max_seq_len is not None and position.original_max_seq_len < 1:
        raise ConfigError(f"model.position.original_max_seq_len must be >= 1, got {position.original_max_seq_len}")
    if not position.beta_fast > position.beta_slow > 0:
        raise ConfigError(
            f"model.position.beta_fast ({position.beta_fast}) must be > beta_slow ({position.beta_slow}) > 0 "
            f"(rotations over the original length that bound YaRN's ramp)"
        )
    if position.attention_factor is not None and not position.attention_factor > 0:
        raise ConfigError(f"model.position.attention_factor must be > 0, got {position.attention_factor}")


def rotary_dims(cfg: ModelConfig) -> int:
    """The dimensions of each head RoPE rotates: int(Dh · rotary_fraction), as transformers'
    partial_rotary_factor and litgpt's rotary_percentage count them."""
    return int(cfg.head_dim * cfg.position.rotary_fraction)


def check_rope_pattern(cfg: ModelConfig) -> None:
    """Refuse a partial rotation that leaves no even number of dimensions, a NoPE interval past
    a stack's depth and a local base without sliding layers."""
    p = cfg.position
    _check_latent(cfg)
    if not 0 < p.rotary_fraction <= 1:
        raise ConfigError(f"model.position.rotary_fraction must be in (0, 1], got {p.rotary_fraction}")
    dims = rotary_dims(cfg)
    if p.rotary_fraction < 1 and (dims < 2 or dims % 2):
        raise ConfigError(
            f"model.position.rotary_fraction={p.rotary_fraction} rotates {dims} of each head's {cfg.head_dim} "
            f"dimensions; rope rotates pairs: pick a fraction giving an even number >= 2"
        )
    if p.nope_every is not None:
        if p.nope_every < 2:
            raise ConfigError(
                f"model.position.nope_every must be >= 2 (every layer without positions is model/position=none), "
                f"got {p.nope_every}"
            )
        for depth_key, depth in stack_depths(cfg):
            if p.nope_every > depth:
                raise ConfigError(
                    f"model.position.nope_every={p.nope_every} exceeds model.{depth_key}={depth}: no layer "
                    f"would be without positions; lower it to at most {depth}"
                )
    if p.theta_local is not None:
        if not p.theta_local > 1:
            raise ConfigError(f"model.position.theta_local must be > 1 (a RoPE base), got {p.theta_local}")
        if all(layer_window(cfg, i) is None for _, depth in stack_depths(cfg) for i in range(depth)):
            raise ConfigError(
                "model.position.theta_local is the base of sliding-window layers; the model has none "
                "(set model/attention=sliding or drop theta_local)"
            )


def nope_layer(cfg: ModelConfig, layer: int) -> bool:
    """Layer `layer` (0-based, within its stack) takes no positions: (layer + 1) % nope_every
    == 0, as SmolLM3's no_rope_layer_interval marks them."""
    k = cfg.position.nope_every
    return k is not None and (layer + 1) % k == 0


def layer_theta(cfg: ModelConfig, layer: int) -> float:
    """RoPE's base in layer `layer`: theta_local in a sliding-window layer when it is set
    (Gemma 3), theta otherwise."""
    p = cfg.position
    if p.theta_local is not None and layer_window(cfg, layer) is not None:
        return p.theta_local
    return p.theta


def per_layer(cfg: ModelConfig) -> bool:
    """RoPE differs between layers (a NoPE interval or a local base): one scheme per layer."""
    return cfg.position.nope_every is not None or cfg.position.theta_local is not None


LATENT = "latent"  # zoo.config.facts.kv.KVKind.latent (the kv rows import these: named here, not imported)


def _check_latent(cfg: ModelConfig) -> None:
    """Latent attention rotates its own d_r dimensions with the plain rule (DeepSeek's YaRN
    folds an mscale into the softmax scale, which zoo.nn.latent_attention does not apply): a
    scaling rule, a partial rotation or a local base is refused with it, not applied in part."""
    if cfg.kv.value != LATENT:
        return
    p = cfg.position
    for name, value, plain in (
        ("scaling", p.scaling, RopeScaling.linear),
        ("scale", p.scale, 1.0),
        ("rotary_fraction", p.rotary_fraction, 1.0),
        ("theta_local", p.theta_local, None),
    ):
        if value != plain:
            shown = value.value if isinstance(value, RopeScaling) else value
            raise ConfigError(
                f"model.position.{name}={shown} is not applied by model.kv={LATENT}, whose shared key "
                f"rotates with plain RoPE; leave model.position.{name} at its default or use model.kv=heads"
            )
