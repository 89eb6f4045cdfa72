"""Gated DeltaNet's widths and counts, torch-free: the `ModelConfig` fields of the recurrent
mixer (`model.linear_*`, `model.conv_kernel`), their checks, and the parameters, FLOPs per token
and state bytes of one layer, which the attention row `AttentionKind.gated_deltanet` of
`zoo.config.facts.attention` reads. The module is `zoo.nn.gated_deltanet.GatedDeltaNet`.

Gated DeltaNet (Yang et al. 2025, "Gated Delta Networks: Improving Mamba2 with Delta Rule"), as
Qwen3-Next defines it (transformers' `Qwen3NextGatedDeltaNet`): Hk key heads of width dk, Hv value
heads of width dv (Hv a multiple of Hk: each key head serves Hv / Hk value heads), so K = Hk·dk,
V = Hv·dv. One layer holds `in_proj_qkvz` (D × (2K + 2V): q, k, v and the output gate z),
`in_proj_ba` (D × 2Hv: the write strength β and the decay's input a), a depthwise causal
convolution of width `conv_kernel` over the 2K + V channels of q, k, v (no bias), `dt_bias` and
`A_log` (Hv each), a gated RMSNorm over dv and `out_proj` (V × D); none has a bias (model.bias is
not read). Its state per sequence: the convolution's last conv_kernel - 1 inputs ((2K + V) ×
(K_conv - 1), in the model's dtype) and the delta rule's matrix per value head (Hv × dk × dv,
float32 whatever the model's dtype, as the reference keeps it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zoo.config.errors import ConfigError

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig

CHUNK = 64  # the chunked form's chunk (Yang et al. 2025; transformers' default chunk_size)
DEFAULT_CONV_KERNEL = 4  # Qwen3-Next's linear_conv_kernel_dim; Mamba 2's d_conv
# the model fields of the mixer, each None = derived (heads from n_heads, widths from head_dim)
FIELDS = ("linear_key_heads", "linear_value_heads", "linear_key_dim", "linear_value_dim")
STATE_ITEMSIZE = 4  # the delta rule's state is float32


def key_heads(cfg: ModelConfig) -> int:
    """Hk: model.linear_key_heads, default model.n_heads."""
    return cfg.linear_key_heads if cfg.linear_key_heads is not None else cfg.n_heads


def value_heads(cfg: ModelConfig) -> int:
    """Hv: model.linear_value_heads, default Hk."""
    return cfg.linear_value_heads if cfg.linear_value_heads is not None else key_heads(cfg)


def key_dim(cfg: ModelConfig) -> int:
    """dk: model.linear_key_dim, default model.head_dim."""
    return cfg.linear_key_dim if cfg.linear_key_dim is not None else cfg.head_dim


def value_dim(cfg: ModelConfig) -> int:
    """dv: model.linear_value_dim, default dk."""
    return cfg.linear_value_dim if cfg.linear_value_dim is not None else key_dim(cfg)


def conv_channels(cfg: ModelConfig) -> int:
    """2K + V: the channels the short convolution runs over (q, k and v)."""
    return 2 * key_heads(cfg) * key_dim(cfg) + value_heads(cfg) * value_dim(cfg)


def check_gated_deltanet(cfg: ModelConfig, *, used: bool) -> None:
    """Refuse the mixer's fields set where no layer is Gated DeltaNet (`used` False), a width that
    is not a positive integer, value heads that are not a multiple of the key heads, and a
    convolution narrower than 1."""
    for name in FIELDS:
        value = getattr(cfg, name)
        if value is None:
            continue
        if not used:
            raise ConfigError(
                f"model.{name}={value!r} only applies to Gated DeltaNet layers (model.attention="
                f"gated_deltanet or model.layer_pattern), and this model has none"
            )
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"model.{name} must be a positive integer (or null: derived), got {value!r}")
    k = cfg.conv_kernel
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"model.conv_kernel must be a positive integer, got {k!r}")
    if used and value_heads(cfg) % key_heads(cfg):
        raise ConfigError(
            f"model.linear_value_heads={value_heads(cfg)} must be a multiple of model.linear_key_heads="
            f"{key_heads(cfg)}: each key head serves linear_value_heads / linear_key_heads value heads"
        )


def parameters(cfg: ModelConfig) -> int:
    """One layer's parameters: in_proj_qkvz D·(2K + 2V), in_proj_ba D·2Hv, conv1d (2K + V)·K_conv,
    dt_bias and A_log Hv each, the gated norm's dv, out_proj V·D."""
    D, Hv = cfg.d_model, value_heads(cfg)
    K, V = key_heads(cfg) * key_dim(cfg), Hv * value_dim(cfg)
    return D * (2 * K + 2 * V) + D * 2 * Hv + conv_channels(cfg) * cfg.conv_kernel + 2 * Hv + value_dim(cfg) + V * D


def flops(cfg: ModelConfig, seq_len: int) -> int:
    """One token's matrix-multiply FLOPs at context S = seq_len: the projections (2·D·(2K + 2V
    + 2Hv) in, 2·V·D out), the depthwise convolution (2·(2K + V)·K_conv), and the chunked delta
    rule's per value head with chunk C = min(S, 64): the intra-chunk products k_β·kᵀ and q·kᵀ
    (2·C·dk each) and the weights·values (2·C·dv), and the state's reads and write (6·dk·dv). Exact
    where S is at most 64 or a multiple of it (a shorter last chunk is counted at full length, as
    causal masking is not discounted for softmax attention)."""
    D, Hv, dk, dv = cfg.d_model, value_heads(cfg), key_dim(cfg), value_dim(cfg)
    K, V = key_heads(cfg) * dk, Hv * dv
    C = min(seq_len, CHUNK)
    projections = 2 * D * (2 * K + 2 * V + 2 * Hv) + 2 * V * D
    rule = Hv * (4 * C * dk + 2 * C * dv + 6 * dk * dv)
    return projections + 2 * conv_channels(cfg) * cfg.conv_kernel + rule


def state_bytes(cfg: ModelConfig, itemsize: int) -> int:
    """One layer's state for one sequence: the convolution's (2K + V)·(K_conv - 1) inputs at
    `itemsize` and the Hv·dk·dv float32 state of the delta rule; the same at every length."""
    conv = conv_channels(cfg) * (cfg.conv_kernel - 1) * itemsize
    return conv + value_heads(cfg) * key_dim(cfg) * value_dim(cfg) * STATE_ITEMSIZE
