"""Output projection and softmax cross-entropy in chunks of tokens, without the (N, V) logits.

At a vocabulary of 8k and a few thousand tokens per batch, the logits tensor, its log-softmax
and their gradients are the largest tensors of a small model's training step and the
memory-bound passes over them take about half of its time. Here each chunk of rows computes
its logits, its loss and the gradient of the loss with respect to those logits while they are
still in cache, turns that into the gradients of the hidden states and of the projection, and
drops the logits. Backward then only scales the stored gradients (the loss is the last
operation of a step, so its incoming gradient is a scalar). Same idea as the "fused linear
cross-entropy" of Liger-Kernel (Hsu et al. 2024) and of Wijmans et al. 2025 ("Cut your losses").

The logits may be soft-capped (c·tanh(z/c), Gemma 2's model.final_softcap) and the loss may
add PaLM's z-loss (Chowdhery et al. 2022), coefficient × mean over target rows of log(Z)², Z the
softmax normaliser: both enter each chunk's gradient in place.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from zoo.nn.host import host_reads_are_free

IGNORE = -100
# at most this many chunks are computed (None: all): a trace of memory on tensors without values
# (zoo.plan) needs only the loop's first chunks, after which every chunk allocates and frees alike.
# A plain module attribute, not a ContextVar: torch.compile reads it (and guards on it) in one graph
_chunks_traced: int | None = None
STEADY_CHUNKS = 3  # the first chunk, the second (holding the first's leftovers), and one more


@contextlib.contextmanager
def first_chunks_only(n: int = STEADY_CHUNKS) -> Iterator[None]:
    """Inside, the chunked loss computes only its first `n` chunks: the loss and gradients are
    wrong, the memory the loop holds at its peak is right (every chunk after the second makes
    and frees the same tensors as the second; the last may be shorter). For memory traces on
    fake tensors only."""
    global _chunks_traced
    before, _chunks_traced = _chunks_traced, n
    try:
        yield
    finally:
        _chunks_traced = before


def _compute_dtype(t: torch.Tensor) -> torch.dtype:
    """The autocast dtype of t's device when autocast is on there, else t's own dtype."""
    kind = t.device.type
    if torch.amp.is_autocast_available(kind) and torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return t.dtype


def _softmax_and_lse(
    logits: torch.Tensor, t_safe: torch.Tensor, logit_t: torch.Tensor, host_branch: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """logits (c, V) -> (softmax (c, V), log-sum-exp (c,)).

    host_branch (eager on the CPU): one fused softmax kernel; the log-normaliser follows from
    the target's probability, lse = logit_t - log p_t, except where p_t underflowed (a loss
    above ~70), recomputed exactly for those rows. Otherwise (an accelerator, or compiling):
    the max and the sum of exponentials give both, with no data-dependent branch (the
    compiler fuses the passes)."""
    if host_branch:
        probs = torch.softmax(logits, dim=-1)  # (c, V)
        p_t = probs.gather(1, t_safe).squeeze(1)  # (c,)
        lse = logit_t - torch.log(p_t)  # (c,)
        tiny = (p_t < 1e-30).nonzero().squeeze(1)  # rows where log p_t is not exact
        if tiny.numel():
            lse[tiny] = torch.logsumexp(logits[tiny], dim=-1)
        return probs, lse
    top = logits.amax(dim=-1, keepdim=True)  # (c, 1)
    probs = (logits - top).exp_()  # (c, V), unnormalised
    total = probs.sum(dim=-1, keepdim=True)  # (c, 1)
    return probs.div_(total), (top + total.log()).squeeze(1)  # (c, V), (c,)


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, chunk: int, smoothing: float, cap, z_coef: float):
        # hidden (N, D), weight (V, D), bias (V,) or None, targets (N,) with IGNORE rows;
        # cap: the soft-cap c or None; z_coef: the z-loss coefficient (0: none).
        # -> (loss, its cross-entropy, its mean log(Z)²), the last two for logging only
        N, V = hidden.shape[0], weight.shape[0]
        dtype = _compute_dtype(hidden)
        acc = torch.promote_types(dtype, torch.float32)  # softmax and sums: at least float32
        w = weight.to(dtype)  # (V, D)
        valid = targets != IGNORE  # (N,)
        count = valid.sum().clamp(min=1).to(acc)
        need_h, need_w, need_b = (
            ctx.needs_input_grad[0],
            ctx.needs_input_grad[1],
            bias is not None and ctx.needs_input_grad[2],
        )
        grad_h = torch.empty_like(hidden) if need_h else None  # (N, D)
        grad_w = torch.zeros(weight.shape, dtype=acc, device=weight.device) if need_w else None  # (V, D)
        grad_b = torch.zeros(V, dtype=acc, device=weight.device) if need_b else None  # (V,)
        total = torch.zeros((), dtype=acc, device=hidden.device)
        total_z = torch.zeros((), dtype=acc, device=hidden.device)
        host_branch = host_reads_are_free(hidden)  # a data-dependent branch is free here
        starts = range(0, N, chunk)
        for start in starts if _chunks_traced is None else starts[:_chunks_traced]:
            h = hidden[start : start + chunk].to(dtype)  # (c, D)
            t = targets[start : start + chunk]  # (c,)
            keep = valid[start : start + chunk]  # (c,)
            logits = (h @ w.t()).to(acc)  # (c, V)
            if bias is not None:
                logits += bias.to(acc)
            if cap is not None:
                capped = torch.tanh(logits / cap)  # (c, V), kept for the cap's derivative 1 - tanh²
                logits = capped * cap
            t_safe = t.clamp(min=0)[:, None]  # (c, 1)
            logit_t = logits.gather(1, t_safe).squeeze(1)  # (c,)
            probs, lse = _softmax_and_lse(logits, t_safe, logit_t, host_branch)  # (c, V), (c,)
            row_loss = lse - logit_t  # (c,) negative log-likelihood
            if smoothing:
                row_loss = (1 - smoothing) * row_loss + smoothing * (lse - logits.mean(dim=-1))
            del logits
            total += torch.where(keep, row_loss, 0.0).sum()
            if z_coef:
                total_z += torch.where(keep, lse.square(), 0.0).sum()
            if not (need_h or need_w or need_b):
                continue
            # d loss / d logits = (softmax - (1-ε)·onehot - ε/V) · keep / count, in place in the
            # probabilities; the row weights keep / count scale the (c, D) factors instead
            grad = probs  # (c, V)
            if z_coef:  # d log(Z)² / d logits = 2·log(Z)·softmax
                grad.mul_(1 + 2 * z_coef * lse[:, None])
            grad.scatter_add_(1, t_safe, torch.full_like(t_safe, -(1 - smoothing), dtype=grad.dtype))
            if smoothing:
                grad -= smoothing / V
            if cap is not None:  # through c·tanh(z/c): x (1 - tanh²)
                grad.mul_(1 - capped.square())
                del capped
            row_weight = (keep.to(acc) / count)[:, None]  # (c, 1)
            if need_b:
                grad_b += (grad * row_weight).sum(0)
            grad = grad.to(dtype)
            if grad_h is not None:  # need_h
                grad_h[start : start + chunk] = (grad @ w) * row_weight.to(dtype)  # (c, D)
            if need_w:
                grad_w += (grad.t() @ (h * row_weight.to(dtype))).to(acc)  # (V, D)
        ctx.save_for_backward(grad_h, grad_w, grad_b)
        ctx.has, ctx.w_dtype = (need_h, need_w, need_b), weight.dtype
        ce, z = total / count, total_z / count
        ctx.mark_non_differentiable(ce, z)
        return ce + z_coef * z if z_coef else ce.clone(), ce, z

    @staticmethod
    def backward(ctx, grad_loss, _grad_ce, _grad_z):
        grad_h, grad_w, grad_b = ctx.saved_tensors
        need_h, need_w, need_b = ctx.has
        return (
            grad_h * grad_loss.to(grad_h.dtype) if need_h else None,
            (grad_w * grad_loss).to(ctx.w_dtype) if need_w else None,
            grad_b * grad_loss if need_b else None,
            None,
            None,
            None,
            None,
            None,
        )


def chunked_linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    chunk: int = 1024,
    label_smoothing: float = 0.0,
    softcap: float | None = None,
    z_loss: float = 0.0,
    parts: bool = False,
):
    """mean over rows with target != -100 of cross_entropy(hidden · weightᵀ + bias, target).

    hidden (N, D), weight (V, D), bias (V,) or None, targets (N,) -> scalar; equal (within
    float rounding) to `F.cross_entropy(F.linear(hidden, weight, bias), targets,
    ignore_index=-100, label_smoothing=ε)` and its gradients, with at most `chunk` rows of
    logits alive at a time. The loss must be used directly (scaled, summed), as a training
    loss is: its gradients are computed in the forward pass.

    `softcap` c: the logits are c·tanh(logits / c) first. `z_loss` > 0 adds z_loss × the mean
    over the same rows of log(Z)², Z = Σ exp(logits) of a row. With `parts`, returns (loss,
    cross-entropy, mean log(Z)²), the last two detached (the mean log(Z)² is 0 without a
    z-loss: not computed).
    """
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    loss, ce, z = _ChunkedLinearCrossEntropy.apply(
        hidden,
        weight,
        bias,
        targets,
        chunk,
        float(label_smoothing),
        None if softcap is None else float(softcap),
        float(z_loss),
    )
    return (loss, ce, z) if parts else loss


def liger_linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """The same loss through Liger-Kernel's fused linear cross-entropy (Hsu et al. 2024): Triton
    kernels, CUDA only, an optional dependency (`pip install '.[liger]'`)."""
    if hidden.device.type != "cuda":
        raise ValueError(
            f"task.output_loss=liger runs Triton kernels on CUDA only, not on {hidden.device.type}; "
            f"use task.output_loss=auto"
        )
    try:
        from liger_kernel.transformers.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyLoss
    except ImportError:
        raise ValueError(
            "task.output_loss=liger needs liger-kernel (pip install '.[liger]' in zoo's source directory)"
        ) from None
    loss = LigerFusedLinearCrossEntropyLoss(ignore_index=IGNORE, label_smoothing=label_smoothing, reduction="mean")
    return loss(weight, hidden, targets, bias)
