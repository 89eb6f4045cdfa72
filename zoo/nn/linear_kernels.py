"""The GPU kernels of the recurrent mixers, used in place of zoo's pure-PyTorch chunked forms when
they are installed (an optional extra: `pip install '.[fla]'`), as transformers' Qwen3-Next does.

Gated DeltaNet's training form goes to flash-linear-attention's `chunk_gated_delta_rule` (Triton)
when the inputs are on CUDA and `fla` imports; everywhere else, and inside `torch_only()`, the
layer runs `zoo.nn.gated_deltanet.chunked_rule`. Both compute the same rule (the GPU suite holds
them to each other in float32 and bf16, outputs, final states and gradients). What the kernel path
takes: no state before the forward, or one state per row without packed documents; packed
documents (`resets`) go to the kernel as variable-length sequences (`cu_seqlens`, one per document
of each row), which costs host reads per forward (zoo's count of the documents, fla's chunk
index). fla dispatches the call to other backends where they are installed (FlashQLA on Hopper
for dk = dv = 128 in bf16); the agreement tests hold for the backend the machine has. A state before the
forward together with packed documents stays on the PyTorch form. Decoding one token at a time
stays on `recurrent_rule` (one small step; a kernel launch buys nothing there).

Mamba 2's kernels (`mamba-ssm`, `causal-conv1d`) publish source only and need a CUDA build: zoo
does not call them, and its Mamba 2 layers train through their PyTorch form on every device.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch

_disabled = 0


@contextlib.contextmanager
def torch_only() -> Iterator[None]:
    """Inside this block the recurrent mixers run their PyTorch forms even where a kernel applies
    (to compare the two, or to rule the kernel out)."""
    global _disabled
    _disabled += 1
    try:
        yield
    finally:
        _disabled -= 1


@functools.cache
def _fla_rule():
    """flash-linear-attention's chunked gated delta rule, or None where it does not import."""
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except Exception:  # not installed, or no Triton backend on this machine
        return None
    return chunk_gated_delta_rule


def fla_available() -> bool:
    return _fla_rule() is not None


def gated_delta_kernel(x: torch.Tensor, initial: torch.Tensor | None, resets: torch.Tensor | None):
    """The kernel that runs Gated DeltaNet's chunked rule for input `x`, or None for the PyTorch form."""
    if _disabled or x.device.type != "cuda" or (initial is not None and resets is not None):
        return None
    return _fla_rule()


def fla_gated_delta(kernel, q, k, v, g, beta, initial: torch.Tensor | None, resets: torch.Tensor | None):
    """`chunked_rule`'s contract through fla: q, k (B, T, Hk, dk), v (B, T, Hv, dv), g, beta
    (B, T, Hv) (g the log decay), initial (B, Hv, dk, dv) or None, resets (B, T) or None ->
    (B, T, Hv, dv) in v's dtype, the final state (B, Hv, dk, dv) float32."""
    B, T, Hk, dk = k.shape
    dtype = v.dtype
    q, k, g, beta = q.to(dtype), k.to(dtype), g.float(), beta.to(dtype)
    # q and k L2-normalised inside the kernel: x / sqrt(Σx² + 1e-6), as zoo's l2norm
    if resets is None:
        out, final = kernel(
            q,
            k,
            v,
            g,
            beta,
            scale=dk**-0.5,
            initial_state=None if initial is None else initial.float(),
            output_final_state=True,
            use_qk_l2norm_in_kernel=True,
        )  # (B, T, Hv, dv), (B, Hv, dk, dv)
        return out.to(dtype), final.float()
    starts = resets.clone()
    starts[:, 0] = True  # every row starts a sequence
    flat = starts.reshape(-1)  # (B·T,)
    cu = torch.cat([flat.nonzero().flatten(), flat.new_tensor([B * T], dtype=torch.long)])  # (N + 1,)
    q, k, v = (t.reshape(1, B * T, *t.shape[2:]) for t in (q, k, v))  # (1, B·T, heads, width)
    g, beta = g.reshape(1, B * T, -1), beta.reshape(1, B * T, -1)  # (1, B·T, Hv)
    out, finals = kernel(
        q, k, v, g, beta, scale=dk**-0.5, output_final_state=True, use_qk_l2norm_in_kernel=True, cu_seqlens=cu
    )
    last = starts.sum(dim=1).cumsum(dim=0) - 1  # (B,) each row's last sequence
    return out.reshape(B, T, *out.shape[2:]).to(dtype), finals[last].float()
