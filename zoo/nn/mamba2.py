"""Mamba 2's SSD mixer (Dao & Gu 2024, "Transformers are SSMs"), in pure PyTorch: a chunked
form for training and prefill, a one-step recurrent form for decoding, and the state they
carry. Widths and counts: `zoo.config.facts.mamba2` (D, E, H, P, G, N, K, Q as there).

Parameter names and shapes are transformers' `BambaMixer` (and mamba_ssm's `Mamba2`): `in_proj`
(D -> 2E + 2GN + H), `conv1d` (depthwise, C_conv = E + 2GN channels, K taps, a bias), `dt_bias`,
`A_log`, `D` (H each), `norm` (the gated RMSNorm's gain, E) and `out_proj` (E -> D), so Bamba's
weights load by renaming.

The chunked form cuts the sequence into chunks of Q positions (the last one shorter, no
padding): within a chunk the output is an attention-like product, (C Bᵀ ⊙ L) (dt·x), L the
decays between positions; across chunks the P × N state of each head is passed on, decayed by
the chunk's total, in a loop over the chunks (elementwise, as mamba_ssm's state passing). The
recurrent form applies h = exp(dt·a)·h + dt·x Bᵀ, y = h C + D·x one position at a time. Both
compute in float32.

Its decoding state is the stack's `zoo.nn.recurrent_state.RecurrentState` (`conv` (B, C_conv,
K - 1) in the input's dtype, `ssm` (B, H, P, N) float32), as Gated DeltaNet's; `padding` (B, T)
zeroes padded positions' inputs, the convolution's inputs and its outputs (transformers' Bamba
zeroes the first and the last), so left padding writes nothing into the state.

Document masking (`document_ids` (B, T), or `reset` (B, T) bool, True where a document starts):
nothing crosses a document start, as mamba_ssm's `seq_idx` does. Each position gets a segment id (the cumulative
count of starts; the state carried in is segment 0); the convolution sees only inputs of its own
segment, the within-chunk decays L are zeroed across segments, a chunk's state keeps only its
last segment's part, the entering state reaches only positions of its segment, and a step that
starts a document zeroes the state first. The kernels of mamba-ssm and causal-conv1d are not
used here: this is the reference path."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.config.facts.mamba2 import Mamba2Dims, mamba2_dims, mamba2_starts
from zoo.config.facts.starts import Starts
from zoo.config.schema.model import ModelConfig
from zoo.nn.recurrent_state import RecurrentState


class GatedRMSNorm(nn.Module):
    """y ⊙ SiLU(z), RMS-normed within each of G groups of E / G channels, times a gain (E):
    transformers' `BambaRMSNormGated` (the norm after the gate, mamba_ssm's norm_before_gate=False)."""

    starts: Starts

    def __init__(self, width: int, groups: int, eps: float, starts: Starts) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))  # (E,)
        self.groups, self.eps, self.starts = groups, eps, starts

    def forward(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """y, z (B, T, E) -> (B, T, E), in y's dtype."""
        dtype = y.dtype
        h = y.float() * F.silu(z.float())
        *lead, E = h.shape
        grouped = h.view(*lead, self.groups, E // self.groups)  # (B, T, G, E / G)
        grouped = grouped * torch.rsqrt(grouped.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * grouped.view(*lead, E).to(dtype)  # (B, T, E)


class ShortConv(nn.Conv1d):
    """The causal depthwise convolution over K taps (`conv1d`: weight (C_conv, 1, K), bias
    (C_conv,)), applied to inputs already preceded by their K - 1 predecessors."""

    starts: Starts

    def __init__(self, channels: int, kernel: int, starts: Starts) -> None:
        super().__init__(channels, channels, kernel, groups=channels, bias=True)
        self.starts = starts

    def causal(self, full: torch.Tensor, seen: torch.Tensor | None = None) -> torch.Tensor:
        """full (B, C_conv, K - 1 + T) -> (B, C_conv, T); `seen` (B, T, K) bool, where given,
        drops the taps it marks False (inputs of another document)."""
        if seen is None:
            return F.conv1d(full, self.weight, self.bias, groups=self.groups)  # (B, C_conv, T)
        B_, C, _ = full.shape
        K = self.kernel_size[0]
        windows = full.unfold(-1, K, 1)  # (B, C_conv, T, K)
        taps = windows * seen[:, None].to(windows.dtype) * self.weight.view(1, C, 1, K)
        out = taps.sum(-1)  # (B, C_conv, T)
        return out if self.bias is None else out + self.bias.view(1, C, 1)


def segment_sum(a: torch.Tensor) -> torch.Tensor:
    """a (..., q) -> (..., q, q): entry [l, s] = a[s+1] + ... + a[l] for s <= l, -inf above the
    diagonal; summed from masked copies rather than as differences of a cumulative sum, so it
    stays exact where the sums are large (transformers' `segment_sum`)."""
    q = a.shape[-1]
    a = a[..., None].expand(*a.shape, q)  # (..., q, q): column s holds a
    below = torch.tril(torch.ones(q, q, dtype=torch.bool, device=a.device), diagonal=-1)
    sums = torch.cumsum(a.masked_fill(~below, 0), dim=-2)  # (..., q, q)
    causal = torch.tril(torch.ones(q, q, dtype=torch.bool, device=a.device))
    return sums.masked_fill(~causal, -torch.inf)


class Mamba2(nn.Module):
    """Mamba 2's mixer: x (B, T, D) -> (B, T, D). With a `RecurrentState` it continues from it and
    leaves the state after the last position there (one position: the recurrent step; more: the
    chunked form from the state); `reset` (B, T) bool marks document starts."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = self.dims = mamba2_dims(cfg)
        starts = mamba2_starts(cfg)
        self.in_proj = nn.Linear(d.d_model, d.in_width, bias=d.bias)
        self.conv1d = ShortConv(d.conv_dim, d.conv_kernel, starts["conv1d"])
        self.dt_bias = nn.Parameter(torch.empty(d.heads))  # (H,)
        self.A_log = nn.Parameter(torch.empty(d.heads))  # (H,)
        self.D = nn.Parameter(torch.empty(d.heads))  # (H,)
        self.norm = GatedRMSNorm(d.inner, d.groups, cfg.norm_eps, starts["norm"])
        self.out_proj = nn.Linear(d.inner, d.d_model, bias=d.bias)
        self.starts = starts[""]  # how the model starts its own parameters (and conv1d's and norm's theirs)
        self.init_std = cfg.init_std
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """The starts a model gives these parameters (`mamba2_starts`; the linear layers
        Normal(0, init_std) and zero biases), drawn from torch's global generator."""
        H = self.dims.heads
        self.A_log.copy_(torch.arange(1, H + 1, dtype=torch.float32).log())
        self.dt_bias.fill_(1.0)
        self.D.fill_(1.0)
        nn.init.normal_(self.conv1d.weight, std=(3 * self.dims.conv_kernel) ** -0.5)
        if self.conv1d.bias is not None:
            nn.init.zeros_(self.conv1d.bias)
        self.norm.weight.fill_(1.0)
        for linear in (self.in_proj, self.out_proj):
            nn.init.normal_(linear.weight, std=self.init_std)
            if linear.bias is not None:
                nn.init.zeros_(linear.bias)

    def empty_state(
        self, batch: int, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> RecurrentState:
        """A zero state for `batch` sequences: the convolution's inputs in `dtype` (default
        float32), the SSM state float32."""
        d = self.dims
        state = RecurrentState()
        conv = torch.zeros(batch, d.conv_dim, d.conv_kernel - 1, device=device, dtype=dtype or torch.float32)
        state.update(conv, torch.zeros(batch, d.heads, d.head_dim, d.state, device=device), 0)
        return state

    def forward(
        self,
        x: torch.Tensor,
        state: RecurrentState | None = None,
        padding: torch.Tensor | None = None,
        document_ids: torch.Tensor | None = None,
        *,
        reset: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x (B, T, D), state or None, padding (B, past + T) (True where a token is) or None,
        document_ids (B, T) or reset (B, T) bool (True where a document starts) or None -> (B, T, D)."""
        d = self.dims
        B_, T, _ = x.shape
        keep = None if padding is None else padding[:, -T:, None].to(x.dtype)  # (B, T, 1)
        if keep is not None:
            x = x * keep  # padded positions write nothing
        if reset is None and document_ids is not None:  # the first token of each document after the first
            reset = F.pad(document_ids[:, 1:] != document_ids[:, :-1], (1, 0), value=False)  # (B, T)
        z, xbc, dt = self.in_proj(x).split(
            [d.inner, d.conv_dim, d.heads], dim=-1
        )  # (B, T, E), (B, T, C_conv), (B, T, H)
        if keep is not None:  # in_proj's bias (model.bias) would reach the convolution from a padded position
            xbc = xbc * keep
        past = None if state is None or state.empty else state
        conv = None if past is None else past.conv
        ssm = None if past is None else past.ssm
        if conv is not None and ssm is not None and T == 1:
            if reset is not None:  # a document starts here: forget what came before
                start = (~reset[:, 0]).float()  # (B,)
                conv = conv * start.to(conv.dtype)[:, None, None]
                ssm = ssm * start[:, None, None, None]
            y, conv, ssm = self._step(xbc[:, 0], dt[:, 0], conv, ssm)
            y = y[:, None]  # (B, 1, H, P)
        else:
            segments = None if reset is None else reset.long().cumsum(1)  # (B, T): 0 = the state carried in
            xbc, conv = self._conv(xbc, conv, segments)  # (B, T, C_conv)
            if keep is not None:
                xbc = xbc * keep
            y, ssm = self._chunked(xbc, dt, ssm, segments)  # (B, T, H, P)
        if state is not None:
            state.update(conv, ssm, T)
        y = y.reshape(B_, T, d.inner).to(x.dtype)  # (B, T, E)
        return self.out_proj(self.norm(y, z))

    # -- the short convolution ----------------------------------------------------------
    def _conv(
        self, xbc: torch.Tensor, conv: torch.Tensor | None, segments: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The causal depthwise convolution and SiLU: xbc (B, T, C_conv) -> (B, T, C_conv),
        continuing from `conv` (B, C_conv, K - 1) (zeros without one), and the last K - 1 inputs
        of the last segment."""
        d = self.dims
        B_, T, C = xbc.shape
        K = d.conv_kernel
        past = xbc.new_zeros(B_, C, K - 1) if conv is None else conv.to(xbc.dtype)  # (B, C_conv, K - 1)
        full = torch.cat([past, xbc.transpose(1, 2)], dim=-1)  # (B, C_conv, K - 1 + T)
        if segments is None:
            out = self.conv1d.causal(full)  # (B, C_conv, T)
        else:
            ids = torch.cat([segments.new_zeros(B_, K - 1), segments], dim=1)  # (B, K - 1 + T)
            seen = ids.unfold(1, K, 1) == segments[..., None]  # (B, T, K): taps of the same document
            out = self.conv1d.causal(full, seen)  # (B, C_conv, T)
        last = full[..., -(K - 1) :] if K > 1 else full[..., :0]  # (B, C_conv, K - 1)
        if segments is not None and K > 1:
            ids_last = ids[:, -(K - 1) :] == segments[:, -1:]  # (B, K - 1): the last document's
            last = last * ids_last[:, None].to(last.dtype)
        return F.silu(out).transpose(1, 2), last  # (B, T, C_conv), (B, C_conv, K - 1)

    # -- the scan -----------------------------------------------------------------------
    def _inputs(self, xbc: torch.Tensor, dt: torch.Tensor):
        """Split the convolved channels and discretise: x (..., H, P), B and C (..., H, N) (each
        group's shared by its H / G heads), dt = softplus(dt + dt_bias) (..., H), all float32,
        and a = -exp(A_log) (H,)."""
        d = self.dims
        lead = xbc.shape[:-1]
        x, b, c = xbc.float().split([d.inner, d.groups * d.state, d.groups * d.state], dim=-1)
        x = x.reshape(*lead, d.heads, d.head_dim)  # (..., H, P)
        per_group = d.heads // d.groups
        b = b.reshape(*lead, d.groups, d.state).repeat_interleave(per_group, dim=-2)  # (..., H, N)
        c = c.reshape(*lead, d.groups, d.state).repeat_interleave(per_group, dim=-2)  # (..., H, N)
        dt = F.softplus(dt.float() + self.dt_bias.float())  # (..., H)
        a = -torch.exp(self.A_log.float())  # (H,)
        return x, b, c, dt, a

    def _step(
        self, xbc: torch.Tensor, dt: torch.Tensor, conv: torch.Tensor, ssm: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One position: xbc (B, C_conv), dt (B, H), the state (conv, ssm) -> y (B, H, P) and the
        state one step on."""
        window = torch.cat([conv.to(xbc.dtype), xbc[..., None]], dim=-1)  # (B, C_conv, K)
        xbc = F.silu(self.conv1d.causal(window))[..., 0]  # (B, C_conv)
        x, b, c, dt, a = self._inputs(xbc, dt)  # (B, H, P), (B, H, N), (B, H, N), (B, H)
        decay = torch.exp(dt * a)  # (B, H)
        h = ssm.float() * decay[..., None, None] + (dt[..., None] * x)[..., None] * b[:, :, None, :]  # (B, H, P, N)
        y = torch.einsum("bhpn,bhn->bhp", h, c) + self.D.float()[:, None] * x  # (B, H, P)
        return y, window[..., 1:].to(conv.dtype), h

    def _chunked(
        self, xbc: torch.Tensor, dt: torch.Tensor, ssm: torch.Tensor | None, segments: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The SSD form over chunks of Q: xbc (B, T, C_conv), dt (B, T, H) -> y (B, T, H, P),
        starting from `ssm` (B, H, P, N) (zeros without one), and the last state."""
        d = self.dims
        B_, T, _ = xbc.shape
        x, b, c, dt, a = self._inputs(xbc, dt)  # (B, T, H, P), (B, T, H, N) x2, (B, T, H)
        log_decay = dt * a  # (B, T, H)
        xdt = x * dt[..., None]  # (B, T, H, P)
        h = x.new_zeros(B_, d.heads, d.head_dim, d.state) if ssm is None else ssm.float()  # (B, H, P, N)
        outputs = []
        for start in range(0, T, d.chunk):
            span = slice(start, min(start + d.chunk, T))
            cum = log_decay[:, span].cumsum(1)  # (B, q, H)
            within = torch.exp(segment_sum(log_decay[:, span].transpose(1, 2)))  # (B, H, q, q): L[l, s]
            enter = torch.exp(cum)  # (B, q, H): the entering state's decay to l
            leave = torch.exp(cum[:, -1:] - cum)  # (B, q, H): s's decay to the chunk's end
            carry = torch.exp(cum[:, -1])  # (B, H)
            if segments is not None:
                ids = segments[:, span]  # (B, q)
                before = segments[:, start - 1 : start] if start else segments.new_zeros(B_, 1)  # (B, 1)
                within = within * (ids[:, :, None] == ids[:, None, :])[:, None].to(within.dtype)
                enter = enter * (ids == before)[..., None].to(enter.dtype)
                leave = leave * (ids == ids[:, -1:])[..., None].to(leave.dtype)
                carry = carry * (ids[:, -1:] == before).to(carry.dtype)
            scores = torch.einsum("blhn,bshn->bhls", c[:, span], b[:, span]) * within  # (B, H, q, q)
            y = torch.einsum("bhls,bshp->blhp", scores, xdt[:, span])  # (B, q, H, P)
            y = y + torch.einsum("blhn,bhpn->blhp", c[:, span], h) * enter[..., None]  # (B, q, H, P)
            outputs.append(y)
            chunk_state = torch.einsum("blhn,blhp->bhpn", b[:, span] * leave[..., None], xdt[:, span])  # (B, H, P, N)
            h = h * carry[..., None, None] + chunk_state  # (B, H, P, N)
        y = torch.cat(outputs, dim=1) if outputs else x.new_zeros(B_, 0, d.heads, d.head_dim)  # (B, T, H, P)
        return y + self.D.float()[:, None] * x, h

    def extra_repr(self) -> str:
        d: Mamba2Dims = self.dims
        return f"heads={d.heads}, head_dim={d.head_dim}, state={d.state}, groups={d.groups}, chunk={d.chunk}"
