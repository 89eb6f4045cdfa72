"""Facts about each attention variant, in one torch-free table: what it is, the `ModelConfig`
fields it reads, the keys one query attends to (which bound its attention FLOPs per token and
its KV-cache slots per layer), and what it refuses. `ModelConfig` checks configs against these
rows (`check_attention`); the stack asks `layer_window` which layers are sliding; the FLOPs of
`zoo.summarize` and the KV-cache bytes of `zoo.models.limits` ask `keys_attended` and
`cache_slots`. The masks live in `zoo.nn.mask`; `tests/config/facts/test_attention_table.py`
keeps the two in step.

The window convention is transformers' (Gemma 2, Gemma 3, Mistral, Qwen2: `sliding_window` in
`transformers.masking_utils.sliding_window_overlay`, key j seen by query i when j > i - window):
`model.window` is the number of keys a query sees, itself included, so in a causal stack query i
sees keys i - window + 1 .. i. `model.global_every=k` makes the layers with (i + 1) % k == 0 full
and the others sliding, as Gemma 2's `layer_types` (k = 2) and Gemma 3's (k = 6) do; null makes
every layer sliding (Mistral 7B). A bidirectional stack (an encoder) sees a symmetric band of
(window - 1) / 2 keys each side and itself, so there `model.window` must be odd (Longformer's
local attention, Beltagy et al. 2020)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.facts import gated_deltanet, mamba2
from zoo.config.facts.families import FAMILY_FACTS

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig


class AttentionKind(Choice):
    full = "full"  # every query sees every key it may (causal: all earlier ones)
    sliding = "sliding"  # local attention: only the `window` nearest keys, itself included
    gated_deltanet = "gated_deltanet"  # a recurrent mixer: the gated delta rule over a fixed-size state
    mamba2 = "mamba2"  # a recurrent mixer: Mamba 2's selective state space (SSD)


@dataclass(frozen=True)
class AttentionFacts:
    """One variant's row.

    - `what`: one line on what a query sees.
    - `paper`: where it comes from.
    - `params`: the `ModelConfig` fields it reads; setting one under another variant is refused.
    - `banded`: a query's keys are bounded by `model.window` (the FLOPs and the KV cache count
      the window, not the context).
    - `refuses`: what it will not combine with, each as the refusal says it.
    - `recurrent`: a fixed-size state instead of keys (no KV cache, no positions); then
      `parameters(cfg)` is one layer's parameters, `flops(cfg, S)` one token's matrix-multiply
      FLOPs at context S, and `state(cfg, itemsize)` one layer's state bytes per sequence.
    """

    what: str
    paper: str
    params: tuple[str, ...] = ()
    banded: bool = False
    refuses: tuple[str, ...] = ()
    recurrent: bool = False
    parameters: Callable[[ModelConfig], int] | None = None
    flops: Callable[[ModelConfig, int], int] | None = None
    state: Callable[[ModelConfig, int], int] | None = None


# what a recurrent kind refuses (`check_mixers` refuses each on one line)
RECURRENT_REFUSALS = (
    "an encoder (model.family=encoder_only or encoder_decoder): the state runs left to right",
    "model.kv=latent (the mixer has no keys to compress)",
    "a position scheme with learned parameters in the attention (T5's bias, Shaw's tables): a recurrent "
    "layer has no positions, so an all-recurrent stack would hold them unused",
    "model.value_residual and model.value_embeds (they act on softmax attention's values)",
    "speculative decoding (the state cannot roll back)",
)

ATTENTION_FACTS: dict[AttentionKind, AttentionFacts] = {
    AttentionKind.full: AttentionFacts(
        what="every query sees every key (a causal stack: itself and every earlier one)",
        paper="Vaswani et al. 2017",
    ),
    AttentionKind.sliding: AttentionFacts(
        what="each query sees the model.window nearest keys, itself included (causal: the window "
        "before it; bidirectional: (window - 1) / 2 each side); layers with (i + 1) % "
        "global_every == 0 stay full",
        paper="Child et al. 2019 (Sparse Transformers); Beltagy et al. 2020 (Longformer); "
        "Jiang et al. 2023 (Mistral 7B); Gemma Team 2024 (Gemma 2: local/global layers)",
        params=("window", "global_every"),
        banded=True,
        refuses=(
            "cross-attention is never sliding (it sees the whole source)",
            "an even model.window in a bidirectional stack (the band is symmetric)",
        ),
    ),
    AttentionKind.gated_deltanet: AttentionFacts(
        what="a recurrent mixer: short causal convolution, the gated delta rule over a fixed-size "
        "state per head (decay and write strength per token), output gate and gated RMSNorm; "
        "layers with (i + 1) % global_every == 0 are full attention",
        paper="Yang et al. 2025 (Gated Delta Networks); Qwen Team 2025 (Qwen3-Next: 3 of 4 layers)",
        params=("global_every", *gated_deltanet.FIELDS),  # and model.conv_kernel, every recurrent kind's
        refuses=RECURRENT_REFUSALS,
        recurrent=True,
        parameters=gated_deltanet.parameters,
        flops=gated_deltanet.flops,
        state=gated_deltanet.state_bytes,
    ),
    AttentionKind.mamba2: AttentionFacts(
        what=mamba2.MAMBA2_FACTS.what + "; layers with (i + 1) % global_every == 0 are full attention",
        paper=mamba2.MAMBA2_FACTS.paper,
        params=("global_every", *mamba2.SSM_DEFAULTS),  # and model.conv_kernel, every recurrent kind's
        refuses=RECURRENT_REFUSALS,
        recurrent=True,
        parameters=mamba2.mamba2_params,
        flops=mamba2.mamba2_flops,
        state=mamba2.mamba2_state_bytes,
    ),
}

# every variant's parameter, owned or not (model.conv_kernel, read by every recurrent kind, is not refused)
ATTENTION_PARAMS = ("window", "global_every", *gated_deltanet.FIELDS, *mamba2.SSM_DEFAULTS)


def check_attention(cfg: ModelConfig) -> None:
    """Refuse a window or a layer pattern that no layer reads, a sliding layer without a positive
    window, and an even window where a stack is bidirectional."""
    pattern = cfg.layer_pattern is not None
    if pattern and cfg.attention != AttentionKind.full:
        raise ConfigError(
            f"model.layer_pattern gives every layer's kind; leave model.attention at full, not {cfg.attention.value}"
        )
    if pattern and cfg.global_every is not None:
        raise ConfigError(
            f"model.global_every={cfg.global_every!r} and model.layer_pattern both place the full layers; set one"
        )
    every = cfg.global_every
    if not pattern and "global_every" not in ATTENTION_FACTS[cfg.attention].params and every is not None:
        raise ConfigError(
            f"model.global_every={every!r} only applies to model.attention=sliding or a recurrent kind, "
            f"not {cfg.attention.value}"
        )
    if every is not None and (not isinstance(every, int) or isinstance(every, bool) or every < 1):
        raise ConfigError(
            f"model.global_every must be a positive integer with model.attention={cfg.attention.value}, got {every!r}"
        )
    kinds = {kind for _, depth in _depths(cfg) for kind in mixer_counts(cfg, depth)}
    window = cfg.window
    if AttentionKind.sliding not in kinds:
        if window is not None:
            raise ConfigError(
                f"model.window={window!r} only applies to model.attention=sliding, not {cfg.attention.value}"
            )
        return
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise ConfigError(f"model.window must be a positive integer with model.attention=sliding, got {window!r}")
    if FAMILY_FACTS[cfg.family].encoder and window % 2 == 0:
        raise ConfigError(
            f"model.window={window} must be odd for model.family={cfg.family.value}: its "
            f"bidirectional stack sees (window - 1) / 2 keys each side and itself"
        )


def _depths(cfg: ModelConfig) -> list[tuple[str, int]]:
    """(the key that sets it, its layers) of each of the family's stacks."""
    depths = [("n_layers", cfg.n_layers)]
    if FAMILY_FACTS[cfg.family].cross_attention:
        depths.append(("n_decoder_layers", cfg.decoder_layers))
    return depths


def pattern_kinds(cfg: ModelConfig) -> list[AttentionKind] | None:
    """model.layer_pattern's kinds (parsed; a ConfigError naming the key for an unknown one), or
    None where it is unset."""
    if cfg.layer_pattern is None:
        return None
    if isinstance(cfg.layer_pattern, str) or not len(cfg.layer_pattern):
        raise ConfigError(
            f"model.layer_pattern must be a non-empty list of {AttentionKind.listed()}, got {cfg.layer_pattern!r}"
        )
    return [AttentionKind.parse(kind, "model.layer_pattern") for kind in cfg.layer_pattern]


def layer_mixer(cfg: ModelConfig, layer: int) -> AttentionKind:
    """The kind of a stack's layer `layer` (0-based, counted within its stack): model.layer_pattern's
    entry layer mod its length; else with global_every=k the layers with (layer + 1) % k == 0 are
    full (Gemma 2's local/global layers, Qwen3-Next's hybrid) and the others model.attention."""
    pattern = pattern_kinds(cfg)
    if pattern is not None:
        return pattern[layer % len(pattern)]
    if cfg.global_every is not None and (layer + 1) % cfg.global_every == 0:
        return AttentionKind.full
    return cfg.attention


def layer_mixers(cfg: ModelConfig, n_layers: int) -> list[AttentionKind]:
    """`layer_mixer` for each of a stack's `n_layers` layers."""
    return [layer_mixer(cfg, i) for i in range(n_layers)]


def mixer_counts(cfg: ModelConfig, n_layers: int) -> Counter[AttentionKind]:
    """How many of a stack's `n_layers` layers are of each kind: `layer_mixers` counted, in time
    that does not grow with the depth (a stack of millions of layers is counted, and refused,
    at once)."""
    pattern = pattern_kinds(cfg)
    counts: Counter[AttentionKind] = Counter()
    if pattern is not None:
        for at, kind in enumerate(pattern):  # entry `at` holds the layers at, at + len, ...
            counts[kind] += n_layers // len(pattern) + (1 if at < n_layers % len(pattern) else 0)
    elif cfg.global_every is not None:
        full = n_layers // cfg.global_every
        counts[AttentionKind.full] += full
        counts[cfg.attention] += n_layers - full
    else:
        counts[cfg.attention] += n_layers
    return +counts  # kinds with no layer dropped


def layer_window(cfg: ModelConfig, layer: int) -> int | None:
    """The window of a stack's layer `layer`, None for a full or a recurrent layer."""
    return cfg.window if layer_mixer(cfg, layer) == AttentionKind.sliding else None


def stack_windows(cfg: ModelConfig, n_layers: int) -> list[int | None]:
    """`layer_window` for each of a stack's `n_layers` layers."""
    return [layer_window(cfg, i) for i in range(n_layers)]


def is_recurrent(kind: AttentionKind) -> bool:
    """A kind with a fixed-size state in place of keys (its row's `recurrent`)."""
    return ATTENTION_FACTS[kind].recurrent


def recurrent_layers(cfg: ModelConfig, n_layers: int) -> list[AttentionKind]:
    """The recurrent kinds among a stack's layers, one per recurrent layer, in order."""
    return [kind for kind in layer_mixers(cfg, n_layers) if is_recurrent(kind)]


def keys_attended(window: int | None, context: int) -> int:
    """The keys one query at context `context` attends to in a layer of `window` (None: full):
    min(context, window). Attention FLOPs per token are 4 · this · H · Dh (scores and values)."""
    return context if window is None else min(context, window)


def cache_slots(window: int | None, length: int) -> int:
    """The positions a layer's KV cache holds after `length` tokens: all of them for a full
    layer, at most `window` for a sliding one (`zoo.nn.cache.KVCache` keeps the last window)."""
    return length if window is None else min(length, window)


def state_bytes(cfg: ModelConfig, n_layers: int, itemsize: int) -> int:
    """The recurrent layers' state bytes of a stack of `n_layers` for one sequence (their rows'
    `state`), the same at every length."""
    total = 0
    for kind in recurrent_layers(cfg, n_layers):
        count = ATTENTION_FACTS[kind].state
        assert count is not None  # every recurrent row counts its state
        total += count(cfg, itemsize)
    return total


def check_mixers(cfg: ModelConfig, settle: Callable[[object, str, object], None]) -> None:
    """model.layer_pattern (settled to a tuple of kind names) tiled over each stack, and what a
    recurrent layer refuses (`RECURRENT_REFUSALS`), each on one line before any weight exists;
    then the recurrent kinds' own fields (`zoo.config.facts.gated_deltanet`, `zoo.config.facts.mamba2`)."""
    pattern = pattern_kinds(cfg)
    if pattern is not None:
        for key, depth in _depths(cfg):
            if depth % len(pattern):
                raise ConfigError(
                    f"model.layer_pattern has {len(pattern)} entries, which do not tile model.{key}={depth}: "
                    f"its length must divide the depth (or equal it)"
                )
        settle(cfg, "layer_pattern", tuple(kind.value for kind in pattern))
    kinds = {kind for _, depth in _depths(cfg) for kind in mixer_counts(cfg, depth)}
    recurrent = sorted(kind.value for kind in kinds if is_recurrent(kind))
    if recurrent:
        what = f"a recurrent layer ({', '.join(recurrent)})"
        source = "model.layer_pattern" if pattern is not None else f"model.attention={cfg.attention.value}"
        if FAMILY_FACTS[cfg.family].encoder:
            raise ConfigError(
                f"{source} has {what}, a causal decoder layer: refused with model.family={cfg.family.value} "
                f"(its state runs left to right); use model.family=decoder_only"
            )
        if cfg.kv == "latent":
            raise ConfigError(f"model.kv=latent compresses keys and values; {what} has none: use model.kv=heads")
        kind = cfg.position.kind
        if kind == "relative" or kind == "shaw":  # their tables live in the attention (one line each, no list)
            raise ConfigError(
                f"model.position.kind={kind} holds learned parameters in the attention; {what} has no "
                f"positions and would leave them unused: use a scheme without them (RoPE, ALiBi, a learned table)"
            )
        if cfg.value_residual != "none" or cfg.value_embeds:
            raise ConfigError(
                f"model.value_residual and model.value_embeds act on softmax attention's values; "
                f"{what} has none: set model.value_residual=none and model.value_embeds=0"
            )
    gated_deltanet.check_gated_deltanet(cfg, used=AttentionKind.gated_deltanet in kinds)
    mamba2.check_mamba2(cfg, used=AttentionKind.mamba2 in kinds)
