"""Gated DeltaNet (Yang et al. 2025, "Gated Delta Networks: Improving Mamba2 with Delta Rule"), the
recurrent mixer of Qwen3-Next's linear-attention layers, with the parameter names and shapes of
transformers' `Qwen3NextGatedDeltaNet` (`in_proj_qkvz`, `in_proj_ba`, `conv1d`, `dt_bias`, `A_log`,
`norm`, `out_proj`), so that a Qwen3-Next checkpoint's weights load by renaming alone.

Per token t and value head: q, k, v from a short causal convolution (silu) over the projected
input, q and k L2-normalised (q also by dk^-0.5), a write strength β_t = sigmoid(b_t) and a decay
α_t = exp(g_t), g_t = -exp(A_log)·softplus(a_t + dt_bias). The state S (dk × dv) follows the
gated delta rule

    S_t = α_t (I - β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ,    o_t = S_tᵀ q_t,

and the output is out_proj(RMSNorm(o_t) · silu(z_t)) with z the output gate. Training runs the
chunked form (chunks of 64: within a chunk the WY/UT transform turns the rule into matrix
products, one state update per chunk); decoding runs the rule token by token from the
`RecurrentState` (`zoo.nn.recurrent_state`). On CUDA with flash-linear-attention installed the
chunked form is its Triton kernel (`zoo.nn.linear_kernels`). Packed documents (data.document_mask) reset the
state at each document's first token (α = 0 there, the convolution does not reach across), and
padded positions are zeroed at the input, so left padding leaves the state at zero. Widths: B
batch, T tokens, D d_model, Hk/Hv key/value heads, dk/dv their widths, C = 2·Hk·dk + Hv·dv the
convolution's channels, K its width. Counts: `zoo.config.facts.gated_deltanet`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.config.facts import gated_deltanet as facts
from zoo.config.facts.starts import NORMAL, ONES, log_uniform
from zoo.config.schema.model import ModelConfig
from zoo.nn.linear_kernels import fla_gated_delta, gated_delta_kernel
from zoo.nn.recurrent_state import RecurrentState


class GatedRMSNorm(nn.Module):
    """RMSNorm over each head's dv, then times silu(gate) (Qwen3-Next's `Qwen3NextRMSNormGated`)."""

    starts = {"weight": ONES}

    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        h = self.weight * h.to(dtype)
        return (h * F.silu(gate.float())).to(dtype)


class ShortConv(nn.Conv1d):
    """The depthwise causal convolution over q, k and v (no bias), weight (C, 1, K)."""

    starts = {"weight": NORMAL}


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


class GatedDeltaNet(nn.Module):
    """x (B, T, D) -> (B, T, D); `state` continues decoding (and is updated), `padding` (B, T)
    zeroes padded inputs, `document_ids` (B, T) resets the state at each new document."""

    # A in (0.01, 16) as transformers' Qwen3-Next starts it; dt_bias at one
    starts = {"dt_bias": ONES, "A_log": log_uniform(0.01, 16.0)}

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.Hk, self.Hv = facts.key_heads(cfg), facts.value_heads(cfg)
        self.dk, self.dv = facts.key_dim(cfg), facts.value_dim(cfg)
        self.key_width, self.value_width = self.Hk * self.dk, self.Hv * self.dv
        self.channels, self.kernel = facts.conv_channels(cfg), cfg.conv_kernel
        D = cfg.d_model
        self.in_proj_qkvz = nn.Linear(D, 2 * self.key_width + 2 * self.value_width, bias=False)
        self.in_proj_ba = nn.Linear(D, 2 * self.Hv, bias=False)
        self.conv1d = ShortConv(self.channels, self.channels, self.kernel, groups=self.channels, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(self.Hv))
        self.A_log = nn.Parameter(torch.empty(self.Hv).uniform_(0.01, 16).log_())
        self.norm = GatedRMSNorm(self.dv, cfg.norm_eps)
        self.out_proj = nn.Linear(self.value_width, D, bias=False)

    def _split(self, x: torch.Tensor):
        """The projections in Qwen3-Next's layout, grouped by key head: per key head [q, k, v, z]
        and [b, a], r = Hv / Hk value heads to each. -> qkv (B, T, C), z (B, T, Hv, dv), b, a (B, T, Hv)."""
        B, T, _ = x.shape
        r = self.Hv // self.Hk
        qkvz = self.in_proj_qkvz(x).reshape(B, T, self.Hk, 2 * self.dk + 2 * r * self.dv)  # (B, T, Hk, ...)
        q, k, v, z = torch.split(qkvz, [self.dk, self.dk, r * self.dv, r * self.dv], dim=3)
        ba = self.in_proj_ba(x)  # (B, T, 2Hv): per key head its r b's, then its r a's
        first = torch.arange(self.Hk, device=x.device)[:, None] * 2 * r + torch.arange(r, device=x.device)  # (Hk, r)
        # gathered, not viewed: their gradients meet in `ba` without a view of a strided gradient
        b, a = ba.index_select(-1, first.flatten()), ba.index_select(-1, (first + r).flatten())  # (B, T, Hv)
        qkv = torch.cat([q.reshape(B, T, -1), k.reshape(B, T, -1), v.reshape(B, T, -1)], dim=-1)  # (B, T, C)
        return qkv, z.reshape(B, T, self.Hv, self.dv), b, a

    def _conv(
        self, qkv: torch.Tensor, past: torch.Tensor | None, resets: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """silu(causal conv) of qkv (B, T, C) after the held inputs `past` (B, C, K - 1) (zeros
        when None) -> ((B, T, C), the last K - 1 inputs (B, C, K - 1)). With `resets`, a window
        does not reach back past its token's document start."""
        B, T, C = qkv.shape
        x = qkv.transpose(1, 2)  # (B, C, T)
        K = self.kernel
        x = F.pad(x, (K - 1, 0)) if past is None else torch.cat([past.to(x.dtype), x], dim=-1)  # (B, C, K - 1 + T)
        held = x[:, :, x.shape[-1] - (K - 1) :]  # (B, C, K - 1)
        weight = self.conv1d.weight  # (C, 1, K)
        if resets is None:
            out = F.conv1d(x, weight, groups=C)  # (B, C, T)
        else:
            windows = x.unfold(-1, K, 1)  # (B, C, T, K): token t's window, positions t - K + 1 .. t
            doc = torch.cumsum(resets.long(), dim=1)  # (B, T) document index of each token
            doc = F.pad(doc, (K - 1, 0), value=-1)  # (B, K - 1 + T) before the start: none
            same = doc.unfold(-1, K, 1) == doc[:, K - 1 :, None]  # (B, T, K)
            out = torch.einsum("bctk,ck->bct", windows * same[:, None].to(x.dtype), weight[:, 0])  # (B, C, T)
        return F.silu(out).transpose(1, 2), held  # (B, T, C)

    def forward(
        self,
        x: torch.Tensor,
        state: RecurrentState | None = None,
        padding: torch.Tensor | None = None,
        document_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        B, T, _ = x.shape
        if padding is not None:
            x = x * padding[:, -T:, None].to(x.dtype)  # padded positions write nothing
        resets = None
        if document_ids is not None:  # (B, T): the first token of each document after the first
            resets = F.pad(document_ids[:, 1:] != document_ids[:, :-1], (1, 0), value=False)  # (B, T)
        qkv, z, b, a = self._split(x)
        past = None if state is None or state.empty else state
        qkv, held = self._conv(qkv, past.conv if past is not None else None, resets)
        q, k, v = torch.split(qkv, [self.key_width, self.key_width, self.value_width], dim=-1)
        q = q.reshape(B, T, self.Hk, self.dk)
        k = k.reshape(B, T, self.Hk, self.dk)
        v = v.reshape(B, T, self.Hv, self.dv)
        beta = b.sigmoid()  # (B, T, Hv)
        g = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias)  # (B, T, Hv) log decay
        initial = past.ssm if past is not None else None
        if initial is not None and T == 1:
            out, final = recurrent_rule(q, k, v, g, beta, initial)
        elif (kernel := gated_delta_kernel(x, initial, resets)) is not None:  # fla on CUDA (zoo.nn.linear_kernels)
            out, final = fla_gated_delta(kernel, q, k, v, g, beta, initial, resets)
        else:
            out, final = chunked_rule(q, k, v, g, beta, initial, resets=resets)
        if state is not None:
            state.update(held, final, T)
        out = self.norm(out, z)  # (B, T, Hv, dv)
        return self.out_proj(out.reshape(B, T, self.value_width))


def _prepare(q, k, v, g, beta):
    """Heads first, float32, q and k L2-normalised (q also x dk^-0.5), each key head repeated for
    its Hv / Hk value heads: q, k (B, Hv, T, dk), v (B, Hv, T, dv), g, beta (B, Hv, T)."""
    r = v.shape[2] // k.shape[2]
    if r > 1:
        q, k = q.repeat_interleave(r, dim=2), k.repeat_interleave(r, dim=2)
    q, k, v, g, beta = (t.transpose(1, 2).float().contiguous() for t in (q, k, v, g, beta))
    q, k = l2norm(q), l2norm(k)
    return q * q.shape[-1] ** -0.5, k, v, g, beta


def recurrent_rule(q, k, v, g, beta, initial: torch.Tensor | None):
    """The gated delta rule token by token (the decoding form): q, k (B, T, Hk, dk), v (B, T, Hv,
    dv), g, beta (B, T, Hv), initial (B, Hv, dk, dv) or None -> (B, T, Hv, dv), final state."""
    out_dtype = v.dtype
    q, k, v, g, beta = _prepare(q, k, v, g, beta)
    B, H, T, dk = k.shape
    S = initial.float() if initial is not None else v.new_zeros(B, H, dk, v.shape[-1])  # (B, H, dk, dv)
    outs = []
    for t in range(T):
        S = S * g[:, :, t].exp()[..., None, None]
        read = (S * k[:, :, t, :, None]).sum(dim=-2)  # (B, H, dv): what S predicts for k_t
        delta = (v[:, :, t] - read) * beta[:, :, t, None]  # (B, H, dv)
        S = S + k[:, :, t, :, None] * delta[:, :, None, :]
        outs.append((S * q[:, :, t, :, None]).sum(dim=-2))  # (B, H, dv)
    return torch.stack(outs, dim=1).to(out_dtype), S  # (B, T, H, dv)


def chunked_rule(q, k, v, g, beta, initial: torch.Tensor | None, *, resets: torch.Tensor | None = None):
    """The gated delta rule in chunks of min(T, 64) (the training form; Yang et al. 2025 §3, as
    transformers' `torch_chunk_gated_delta_rule`): the same shapes and result as `recurrent_rule`.
    `resets` (B, T): the state is zeroed before these tokens (a decay of exactly 0)."""
    out_dtype = v.dtype
    q, k, v, g, beta = _prepare(q, k, v, g, beta)
    B, H, T, dk = k.shape
    dv = v.shape[-1]
    C = min(T, facts.CHUNK)
    pad = (C - T % C) % C
    q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    g, beta = F.pad(g, (0, pad)), F.pad(beta, (0, pad))
    N = (T + pad) // C
    doc = torch.zeros(B, T + pad, dtype=torch.long, device=q.device)
    if resets is not None:
        doc[:, :T] = torch.cumsum(resets.long(), dim=1)
        doc[:, T:] = doc[:, T - 1 : T]  # the padding continues the last document
    k_beta, v_beta = k * beta[..., None], v * beta[..., None]
    q, k, k_beta, v_beta = (t.reshape(B, H, N, C, -1) for t in (q, k, k_beta, v_beta))  # (B, H, N, C, .)
    cum = g.reshape(B, H, N, C).cumsum(dim=-1)  # (B, H, N, C) log decay from the chunk's start
    doc = doc.reshape(B, 1, N, C)
    before = torch.cat([doc[:, :, :1, :1], doc[:, :, :-1, -1:]], dim=2)  # (B, 1, N, 1) the document before each chunk
    same = doc[..., :, None] == doc[..., None, :]  # (B, 1, N, C, C) no reset between j and i
    from_start = (doc == before).float()  # (B, 1, N, C) no reset since the chunk's start
    to_end = (doc == doc[..., -1:]).float()  # no reset from the token to the chunk's end
    lower = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    decay = (cum[..., :, None] - cum[..., None, :]).masked_fill(~lower, float("-inf")).exp() * same  # (B, H, N, C, C)
    system = (k_beta @ k.transpose(-1, -2)) * decay  # (B, H, N, C, C), its strict lower part the UT system
    scores = (q @ k.transpose(-1, -2)) * decay
    eye = torch.eye(C, dtype=q.dtype, device=q.device)
    unit = system.tril(-1) + eye  # I + strictly lower: the rule's updates within the chunk
    new_values = torch.linalg.solve_triangular(unit, v_beta, upper=False, unitriangular=True)
    reads = torch.linalg.solve_triangular(
        unit, k_beta * (cum.exp() * from_start)[..., None], upper=False, unitriangular=True
    )  # (B, H, N, C, dk): how much each update reads of the state before the chunk
    q = q * (cum.exp() * from_start)[..., None]
    k = k * ((cum[..., -1:] - cum).exp() * to_end)[..., None]
    chunk_decay = (cum[..., -1].exp() * from_start[..., -1])[..., None, None]  # (B, H, N, 1, 1)
    S = initial.float() if initial is not None else q.new_zeros(B, H, dk, dv)  # (B, H, dk, dv)
    out = []
    for n in range(N):
        corrected = new_values[:, :, n] - reads[:, :, n] @ S  # (B, H, C, dv)
        out.append(q[:, :, n] @ S + scores[:, :, n] @ corrected)
        S = S * chunk_decay[:, :, n] + k[:, :, n].transpose(-1, -2) @ corrected
    o = torch.stack(out, dim=2).reshape(B, H, N * C, dv)[:, :, :T]  # (B, H, T, dv)
    return o.transpose(1, 2).to(out_dtype), S  # (B, T, H, dv)
