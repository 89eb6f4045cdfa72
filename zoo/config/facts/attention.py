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

from dataclasses import dataclass
from typing import TYPE_CHECKING

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.facts.families import FAMILY_FACTS

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig


class AttentionKind(Choice):
    full = "full"  # every query sees every key it may (causal: all earlier ones)
    sliding = "sliding"  # local attention: only the `window` nearest keys, itself included


@dataclass(frozen=True)
class AttentionFacts:
    """One variant's row.

    - `what`: one line on what a query sees.
    - `paper`: where it comes from.
    - `params`: the `ModelConfig` fields it reads; setting one under another variant is refused.
    - `banded`: a query's keys are bounded by `model.window` (the FLOPs and the KV cache count
      the window, not the context).
    - `refuses`: what it will not combine with, each as the refusal says it.
    """

    what: str
    paper: str
    params: tuple[str, ...] = ()
    banded: bool = False
    refuses: tuple[str, ...] = ()


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
}

ATTENTION_PARAMS = ("window", "global_every")  # every variant's parameter, owned or not


def check_attention(cfg: ModelConfig) -> None:
    """Refuse a window or a layer pattern that the variant does not read, a sliding stack
    without a positive window, and an even window where a stack is bidirectional."""
    facts = ATTENTION_FACTS[cfg.attention]
    for name in ATTENTION_PARAMS:
        if name not in facts.params and getattr(cfg, name) is not None:
            raise ConfigError(
                f"model.{name}={getattr(cfg, name)!r} only applies to "
                f"model.attention=sliding, not {cfg.attention.value}"
            )
    if not facts.banded:
        return
    for name in ATTENTION_PARAMS:
        value = getattr(cfg, name)
        if name == "window" or value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(
                    f"model.{name} must be a positive integer with model.attention=sliding, got {value!r}"
                )
    if FAMILY_FACTS[cfg.family].encoder and cfg.window is not None and cfg.window % 2 == 0:
        raise ConfigError(
            f"model.window={cfg.window} must be odd for model.family={cfg.family.value}: its "
            f"bidirectional stack sees (window - 1) / 2 keys each side and itself"
        )


def layer_window(cfg: ModelConfig, layer: int) -> int | None:
    """The window of a stack's layer `layer` (0-based, counted within its stack), None for a
    full layer: with global_every=k the layers with (layer + 1) % k == 0 are full (Gemma 2)."""
    if not ATTENTION_FACTS[cfg.attention].banded:
        return None
    if cfg.global_every is not None and (layer + 1) % cfg.global_every == 0:
        return None
    return cfg.window


def stack_windows(cfg: ModelConfig, n_layers: int) -> list[int | None]:
    """`layer_window` for each of a stack's `n_layers` layers."""
    return [layer_window(cfg, i) for i in range(n_layers)]


def keys_attended(window: int | None, context: int) -> int:
    """The keys one query at context `context` attends to in a layer of `window` (None: full):
    min(context, window). Attention FLOPs per token are 4 · this · H · Dh (scores and values)."""
    return context if window is None else min(context, window)


def cache_slots(window: int | None, length: int) -> int:
    """The positions a layer's KV cache holds after `length` tokens: all of them for a full
    layer, at most `window` for a sliding one (`zoo.nn.cache.KVCache` keeps the last window)."""
    return length if window is None else min(length, window)
