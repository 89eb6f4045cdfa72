"""Facts about Mamba 2's SSD mixer (Dao & Gu 2024, "Transformers are SSMs"), torch-free: what it
computes, the `ModelConfig` fields it reads (`model.ssm_*`), its widths, how its parameters
start, and its parameters, matrix-multiply FLOPs and recurrent-state bytes per layer, which the
attention row `AttentionKind.mamba2` of `zoo.config.facts.attention` reads (`check_mixers` runs
`check_mamba2`); `zoo.nn.mamba2.Mamba2` builds the mixer from `mamba2_dims`;
`tests/nn/test_mamba2.py` keeps the counts and the built module in step.

The layout is transformers' `BambaMixer` (and mamba_ssm's `Mamba2`), so Bamba and Falcon-H1
weights load by renaming. Shapes: D = d_model, E = ssm_expand·D (the inner width), H = E / P
heads of P = ssm_head_dim, G = ssm_groups (B and C shared by H / G heads), N = ssm_state,
K = model.conv_kernel (every recurrent kind's), C_conv = E + 2·G·N (the channels the short convolution sees):

- in_proj x (D -> 2·E + 2·G·N + H) splits into the gate z (E), the convolved xBC (C_conv) and
  dt (H); with model.bias it has a bias, as out_proj has;
- conv1d: a causal depthwise convolution over K positions (with a bias), then SiLU; its output
  splits into x (H·P), B (G·N) and C (G·N);
- per head, dt = softplus(dt + dt_bias), a = -exp(A_log), and the state recurrence
  h_t = exp(dt_t·a)·h_{t-1} + dt_t·x_t B_tᵀ (P × N), y_t = h_t C_t + D·x_t;
- y ⊙ SiLU(z), RMS-normed within each of the G groups (gated RMSNorm, norm after the gate),
  times a gain (E), then out_proj (E -> D).

The chunked (SSD) form computes the same y over chunks of Q = ssm_chunk positions: quadratic
attention-like products within a chunk, the state passed from chunk to chunk. Its matrix
multiplies per chunk of q positions: C·Bᵀ (2·q²·H·N), those scores times x (2·q²·H·P), the
chunk's state (2·q·H·P·N) and the entering state read by C (2·q·H·P·N); the state passing is
elementwise. A sequence of S positions is cut into chunks of Q and a last chunk of S mod Q, so
the FLOPs per token at context S are exact when S <= Q or S is a multiple of Q (a chunk of one
position sums over nothing within it: torch multiplies elementwise there, and the count follows). Elementwise work
(the convolution's SiLU, softplus, the gate and the norm) is left out, as flops.py does; the
depthwise convolution's multiply-adds are counted (2·K per channel and position), as torch's
FlopCounterMode counts them.

The decoding state of one sequence and layer is the convolution's last K - 1 inputs (C_conv ×
(K - 1), in the model's dtype) and the SSM state (H × P × N, float32 whatever the model's dtype,
as Gated DeltaNet's): fixed in the context length."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from zoo.config.errors import ConfigError
from zoo.config.facts.starts import ONES, ZEROS, Init, Start, Starts, normal

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig

# {field: default}: the model.ssm_* keys the mixer reads (ModelConfig holds them, with these
# defaults: mamba_ssm's Mamba2 and transformers' Bamba, with a 128-wide state)
SSM_DEFAULTS: dict[str, int | None] = {
    "ssm_state": 128,
    "ssm_heads": None,
    "ssm_head_dim": 64,
    "ssm_groups": 1,
    "ssm_expand": 2,
    "ssm_chunk": 256,
}
STATE_ITEMSIZE = 4  # the SSM state is float32


@dataclass(frozen=True)
class Mamba2Facts:
    """The mixer's row: `what` it computes, `paper`, the `ModelConfig` fields it reads
    (`params`), and what it refuses, each as the refusal says it."""

    what: str
    paper: str
    params: tuple[str, ...]
    refuses: tuple[str, ...]


MAMBA2_FACTS = Mamba2Facts(
    what="a selective state-space layer: per head a P × N state decayed by exp(dt·a) and fed "
    "dt·x Bᵀ at each position, read by C; a short causal convolution before, a SiLU gate and a "
    "grouped RMSNorm after; the memory of a layer is that state, fixed in the context length",
    paper="Dao & Gu 2024 (Transformers are SSMs: Mamba 2, SSD); Bamba (IBM 2024); Falcon-H1 (TII 2025)",
    params=tuple(SSM_DEFAULTS),  # and model.conv_kernel, every recurrent kind's
    refuses=("model.ssm_* keys where no layer is Mamba 2",),
)


@dataclass(frozen=True, kw_only=True)
class Mamba2Dims:
    """The mixer's widths: D, E = expand·D, H heads of P, G groups, N state, K kernel, Q chunk."""

    d_model: int
    inner: int  # E
    heads: int  # H
    head_dim: int  # P
    groups: int  # G
    state: int  # N
    conv_kernel: int  # K
    chunk: int  # Q
    bias: bool  # in_proj and out_proj biases (model.bias)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "bias" and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ConfigError(f"Mamba 2: {f.name} must be a positive integer, got {value!r}")
        if self.heads * self.head_dim != self.inner:
            raise ConfigError(
                f"model.ssm_heads x model.ssm_head_dim must equal model.ssm_expand x model.d_model: "
                f"{self.heads} x {self.head_dim} = {self.heads * self.head_dim} != {self.inner}"
            )
        if self.heads % self.groups:
            raise ConfigError(
                f"model.ssm_heads={self.heads} must be divisible by model.ssm_groups={self.groups} "
                f"(each group's B and C serve H / G heads)"
            )

    @property
    def conv_dim(self) -> int:
        """C_conv = E + 2·G·N: the x, B and C channels the short convolution sees."""
        return self.inner + 2 * self.groups * self.state

    @property
    def in_width(self) -> int:
        """in_proj's outputs: z (E), xBC (C_conv), dt (H)."""
        return self.inner + self.conv_dim + self.heads


def _positive(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"model.{name} must be a positive integer, got {value!r}")


def mamba2_dims(cfg: ModelConfig) -> Mamba2Dims:
    """The widths of a config's Mamba 2 mixer: H = ssm_heads, or E / ssm_head_dim when null;
    one line naming the numbers when they do not divide."""
    for name in SSM_DEFAULTS:
        if name != "ssm_heads" or cfg.ssm_heads is not None:
            _positive(name, getattr(cfg, name))
    inner = cfg.ssm_expand * cfg.d_model
    heads = cfg.ssm_heads
    if heads is None:
        if inner % cfg.ssm_head_dim:
            raise ConfigError(
                f"model.ssm_expand x model.d_model = {cfg.ssm_expand} x {cfg.d_model} = {inner} must be "
                f"divisible by model.ssm_head_dim={cfg.ssm_head_dim} (the heads are E / P)"
            )
        heads = inner // cfg.ssm_head_dim
    return Mamba2Dims(
        d_model=cfg.d_model,
        inner=inner,
        heads=heads,
        head_dim=cfg.ssm_head_dim,
        groups=cfg.ssm_groups,
        state=cfg.ssm_state,
        conv_kernel=cfg.conv_kernel,
        chunk=cfg.ssm_chunk,
        bias=bool(cfg.bias),
    )


def check_mamba2(cfg: ModelConfig, *, used: bool) -> None:
    """Refuse model.ssm_* values that are not positive integers, a key set away from its default
    where no layer is Mamba 2 (`used` False: model.attention or model.layer_pattern names none),
    and, where it is used, widths that do not divide. The defaults pass on every config that
    leaves the keys alone. (A bidirectional stack is refused for every recurrent kind alike:
    `zoo.config.facts.attention.check_mixers`.)"""
    for name, default in SSM_DEFAULTS.items():
        value = getattr(cfg, name)
        if value is not None or default is not None:
            _positive(name, value)
        if not used and value != default:
            raise ConfigError(
                f"model.{name}={value!r} only applies to Mamba 2 layers (model.attention=mamba2 or "
                f"model.layer_pattern), and this model has none"
            )
    if used:
        mamba2_dims(cfg)


def mamba2_starts(cfg: ModelConfig) -> dict[str, Starts]:
    """How each parameter starts, by the module that holds it (the mixer's own, its conv1d and its
    norm; in_proj and out_proj are linear layers, started as every one): A_log = log(1..H)
    (S4D-Real's a_h = -h, as Bamba and Falcon-H1 start it), dt_bias and D at 1 (Bamba), the
    convolution's weights Normal(0, 1/sqrt(3·K)) (the variance of torch's default uniform start
    for a depthwise kernel of K taps) and bias at 0, the norm's gain at 1."""
    return {
        "": {"A_log": Init(Start.log_arange), "dt_bias": ONES, "D": ONES},
        "conv1d": {"weight": normal((3 * cfg.conv_kernel) ** -0.5), "bias": ZEROS},
        "norm": {"weight": ONES},
    }


def mamba2_params(cfg: ModelConfig) -> int:
    """One mixer's parameters: in_proj D·(2E + 2GN + H) (+ bias), conv1d C_conv·(K + 1), dt_bias,
    A_log and D (H each), the norm's gain E, out_proj E·D (+ bias D)."""
    d = mamba2_dims(cfg)
    bias = int(d.bias)
    in_proj = (d.d_model + bias) * d.in_width
    conv = d.conv_dim * (d.conv_kernel + 1)
    out_proj = d.inner * d.d_model + bias * d.d_model
    return in_proj + conv + 3 * d.heads + d.inner + out_proj


def mamba2_sequence_flops(cfg: ModelConfig, seq_len: int) -> int:
    """The matrix-multiply FLOPs of one mixer's chunked forward over one sequence of `seq_len`
    positions: the projections and the convolution per position, the SSD products per chunk
    (chunks of Q, the last one seq_len mod Q long)."""
    d = mamba2_dims(cfg)
    full, last = divmod(seq_len, d.chunk)
    per_position = 2 * d.d_model * d.in_width + 2 * d.conv_kernel * d.conv_dim + 2 * d.inner * d.d_model
    chunks = full * _chunk_flops(d, d.chunk) + (_chunk_flops(d, last) if last else 0)
    return seq_len * per_position + chunks


def _chunk_flops(d: Mamba2Dims, q: int) -> int:
    """The SSD products of one chunk of q positions: C·Bᵀ (2·q²·H·N), the scores times dt·x
    (2·q²·H·P), the chunk's state (2·q·H·P·N) and C times the entering state (2·q·H·P·N). A
    chunk of one position sums over nothing in the second and third (torch multiplies them
    elementwise), so they count no FLOPs there."""
    scores, read = 2 * q * q * d.heads * d.state, 2 * q * d.heads * d.head_dim * d.state
    if q == 1:
        return scores + read
    return scores + 2 * q * q * d.heads * d.head_dim + 2 * read


def mamba2_flops(cfg: ModelConfig, seq_len: int) -> int:
    """Forward matrix-multiply FLOPs per token of one mixer at context `seq_len` (the chunked
    form; exact when seq_len <= Q or a multiple of Q, else rounded down):
    2·D·(2E + 2GN + H) + 2·K·C_conv + 2·E·D + 2·q·H·(N + P) + 4·H·P·N, q = min(seq_len, Q) > 1."""
    return mamba2_sequence_flops(cfg, seq_len) // seq_len


def mamba2_step_flops(cfg: ModelConfig) -> int:
    """Forward matrix-multiply FLOPs of one decoding step (the recurrent form): the projections,
    the convolution over its K taps and C · state (2·H·P·N); the state update is elementwise."""
    d = mamba2_dims(cfg)
    projections = 2 * d.d_model * d.in_width + 2 * d.inner * d.d_model
    return projections + 2 * d.conv_kernel * d.conv_dim + 2 * d.heads * d.head_dim * d.state


def mamba2_state_bytes(cfg: ModelConfig, itemsize: int) -> int:
    """One sequence's decoding state in one mixer: the convolution's last K - 1 inputs
    (C_conv × (K - 1)) at `itemsize` and the float32 SSM state (H × P × N)."""
    d = mamba2_dims(cfg)
    return d.conv_dim * (d.conv_kernel - 1) * itemsize + d.heads * d.head_dim * d.state * STATE_ITEMSIZE
