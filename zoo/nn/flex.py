"""FlexAttention (torch.nn.attention.flex_attention; Dong et al. 2024) for the sliding window's
band: the band as a block mask, whose blocks wholly outside it are skipped, where SDPA with a
boolean mask computes every score and masks most of them.

Where it is used (`use_flex`): a forward without autograd and without a KV cache
(evaluation, scoring) on CPU, of a sequence at least FLEX_MIN_LEN long, without a padding mask,
for a position scheme that adds nothing to the scores (FlexAttention's score_mod is not wired to
the schemes' biases), without attention dropout, outside a compiled model. Measured on a 2-core
CPU (docs/performance.md, benchmarks/sliding_mask.py): compiled FlexAttention's forward beats
SDPA with the band mask 3x at 1,024 tokens and 14x at 4,096 (window 128); torch 2.13 has no
FlexAttention backward on CPU, so training runs SDPA with the boolean band. It is compiled once per shape, so shorter
sequences, whose compilation would cost more than it saves, keep SDPA. `tests/nn/test_sliding_window.py`
checks both give the same logits.

A stack's `sliding_kernel` set to "flex" takes FlexAttention for its sliding layers at any
length past the window, and on a GPU in training too (its backward is a GPU kernel) and inside
a compiled model (the block mask made once per shape, FlexAttention traced into the model's
graph). On the CPU it keeps SDPA where a backward is needed and inside a compiled model, whose
inductor lowering of FlexAttention gave logits 0.15 off in torch 2.13 (`tests/nn/test_sliding_window.py`). It is opt-in, as the document mask's kernel is (`zoo.nn.documents`), until the
whole-model training step is measured on a GPU (`benchmarks/sliding_train.py`, the `slidetrain`
part of `benchmarks/gpu_check.sh`); "sdpa" keeps the boolean band everywhere."""

from __future__ import annotations

import functools
from typing import TypeGuard

import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

from zoo.config.facts.positions import POSITION_FACTS, PositionKind, Site
from zoo.nn.mask import band_mask_mod

FLEX_MIN_LEN = 1024  # shortest sequence that takes FlexAttention (compilation is per shape)


KERNELS = ("flex", "sdpa")


def use_flex(
    *,
    T: int,
    window: int,
    device: torch.device,
    position: PositionKind,
    padded: bool,
    dropout: float,
    kernel: str | None = None,
) -> bool:
    """Whether a sliding layer's self-attention over T tokens (no cache) runs FlexAttention.
    `kernel` None: the measured CPU rule above; "sdpa": never; "flex": wherever it can run."""
    if kernel is not None and kernel not in KERNELS:
        raise ValueError(f"sliding kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    acts = POSITION_FACTS[position].acts
    expressible = T > window and not padded and dropout == 0.0 and Site.scores not in acts and Site.values not in acts
    if kernel == "sdpa" or not expressible:
        return False
    if kernel == "flex":
        if device.type == "cpu":  # no backward there; and inside a compiled model inductor's CPU
            # lowering gave logits 0.15 off in torch 2.13 (the same call compiled alone was exact)
            return not torch.is_grad_enabled() and not torch.compiler.is_compiling()
        return True
    if torch.compiler.is_compiling():  # a compiled model keeps the boolean band (one graph, no nested compile)
        return False
    return device.type == "cpu" and not torch.is_grad_enabled() and T >= FLEX_MIN_LEN


@functools.lru_cache(maxsize=8)
def band_block_mask(window: int, causal: bool, T: int, device: torch.device) -> BlockMask:
    """The band of `window` over T queries and T keys as a block mask (the same for every row
    and head), made once per shape."""
    return create_block_mask(band_mask_mod(window, causal), None, None, T, T, device=device)


@functools.lru_cache(maxsize=1)
def _compiled():
    return torch.compile(flex_attention)


def flex(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_mask: BlockMask, scale: float | None) -> torch.Tensor:
    """q (B, H, T, Dh); k, v (B, Hkv, T, Dh) -> (B, H, T, Dh), attention under `block_mask`."""
    run = flex_attention if torch.compiler.is_compiling() else _compiled()
    return run(q, k, v, block_mask=block_mask, scale=scale, enable_gqa=k.shape[1] != q.shape[1])


def is_block_mask(mask: object) -> TypeGuard[BlockMask]:
    return isinstance(mask, BlockMask)


def dense(block_mask: BlockMask, T: int, S: int, device: torch.device) -> torch.Tensor:
    """The boolean (1, 1, T, S) mask a block mask's mask_mod gives, for the paths that need the
    attention weights."""
    i = torch.arange(T, device=device)[:, None]  # (T, 1)
    j = torch.arange(S, device=device)[None, :]  # (1, S)
    first = torch.zeros((), dtype=torch.long, device=device)  # batch row 0, head 0
    return block_mask.mask_mod(first, first, i, j)[None, None]  # (1, 1, T, S)
