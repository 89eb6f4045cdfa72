"""RoPE's inverse frequencies under each context-extension rule of `model.position.scaling`
(rows: `zoo.config.facts.rope.SCALING_FACTS`), and the multiplier of cos and sin it sets, as
transformers' `modeling_rope_utils` computes them (`_compute_linear_scaling_rope_parameters`,
`_compute_dynamic_ntk_parameters`, `_compute_yarn_parameters`); static NTK-aware scaling, which
transformers lacks, by its formula."""

from __future__ import annotations

import math

import torch

from zoo.config.facts.rope import RopeScaling


def base_inv_freq(theta: float, dims: int) -> torch.Tensor:
    """1 / theta^(2i/dims), i < dims/2: (dims/2,). Computed as Hugging Face's Llama does (theta
    ** -x in float32 drifts from it by up to 1e-4 in cos/sin at positions in the thousands)."""
    return 1.0 / theta ** (torch.arange(0, dims, 2, dtype=torch.int64).float() / dims)


def ntk_inv_freq(theta: float, dims: int, factor: float) -> torch.Tensor:
    """NTK-aware scaling (bloc97 2023; Peng et al. 2024 eq. 16): the base raised to
    theta · factor^(dims/(dims-2))."""
    return base_inv_freq(theta * factor ** (dims / (dims - 2)), dims)


def dynamic_inv_freq(theta: float, dims: int, factor: float, original: int, positions: torch.Tensor) -> torch.Tensor:
    """Dynamic NTK scaling at a forward's length L = its largest position + 1 (at least the
    original length): the base theta · (factor · L / original - factor + 1)^(dims/(dims-2)), in
    transformers' order of operations; (dims/2,) on the positions' device, without a Python
    branch on the tensor."""
    seq_len = torch.clamp(positions.max() + 1, min=original)  # () the length this forward reaches
    base = theta * ((factor * seq_len / original) - (factor - 1)) ** (dims / (dims - 2))  # ()
    return 1.0 / (base ** (torch.arange(0, dims, 2, dtype=torch.int64, device=positions.device).float() / dims))


def yarn_attention_factor(factor: float) -> float:
    """YaRN's cos/sin multiplier (Peng et al. 2024, eq. 22 with √(1/t) = 0.1·ln(s) + 1)."""
    return 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0


def yarn_inv_freq(
    theta: float, dims: int, factor: float, original: int, beta_fast: float, beta_slow: float
) -> torch.Tensor:
    """YaRN's NTK-by-parts (Peng et al. 2024, §3.2): a frequency that turns fewer than
    beta_slow times over the original length is interpolated (divided by the factor), one that
    turns more than beta_fast times is kept, and a linear ramp blends those between."""

    def correction_dim(rotations: float) -> float:  # the dimension that turns `rotations` times
        return (dims * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(theta))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high: float = min(math.ceil(correction_dim(beta_slow)), dims - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    ramp = ((torch.arange(dims // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)  # (dims/2,)
    pos_freqs = theta ** (torch.arange(0, dims, 2).float() / dims)  # (dims/2,)
    kept = 1 - ramp  # 1: extrapolated (kept), 0: interpolated
    return (1.0 / (factor * pos_freqs)) * (1 - kept) + (1.0 / pos_freqs) * kept


def scaled_inv_freq(
    rule: RopeScaling,
    *,
    theta: float,
    dims: int,
    factor: float,
    original: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    attention_factor: float | None = None,
) -> tuple[torch.Tensor, float]:
    """(inv_freq (dims/2,), cos/sin multiplier) of `rule` at `factor`. Linear returns the plain
    frequencies: zoo divides the positions by the factor instead (the same angles, and the
    arithmetic every checkpoint trained with model.position.scale ran); dynamic too, its own
    coming from each forward's positions (`dynamic_inv_freq`)."""
    if rule in (RopeScaling.linear, RopeScaling.dynamic):  # dynamic: the original length's, until a forward
        return base_inv_freq(theta, dims), 1.0
    if rule == RopeScaling.ntk:
        return ntk_inv_freq(theta, dims, factor), 1.0
    if rule == RopeScaling.yarn:
        multiplier = attention_factor if attention_factor is not None else yarn_attention_factor(factor)
        return yarn_inv_freq(theta, dims, factor, original, beta_fast, beta_slow), multiplier
    raise ValueError(f"unknown RoPE scaling rule {rule!r}")
