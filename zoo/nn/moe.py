"""A mixture-of-experts feed-forward layer (`model.ffn=moe`): token-choice top-k routing over E
experts (Shazeer et al. 2017; Switch, Fedus et al. 2021; Mixtral, Jiang et al. 2024; OLMoE,
Muennighoff et al. 2024), optional shared experts (DeepSeekMoE, Dai et al. 2024), a capacity
factor or none (dropless), and the two auxiliary losses of the router: Switch's load-balancing
loss and the router z-loss (Zoph et al. 2022, ST-MoE).

Weights, stacked per layer so that FSDP shards them like any other weight and a grouped GEMM
reads them as they are, in the layout of transformers' Mixtral (`MixtralExperts`):

- `router.weight` (E, D): an `nn.Linear` without bias (Mixtral's `gate.weight`);
- `experts.w_in` (E, F, D), gated (E, 2·F, D): the gate rows first, then the up rows (Mixtral's
  `gate_up_proj`); `experts.w_out` (E, D, F) (Mixtral's `down_proj`);
- `shared`: the shared experts as one dense `FeedForward` moe_shared·F wide (absent at 0);
- `shared_gate.weight` (1, D) with model.moe_shared_gate=sigmoid: the shared experts' output
  times sigmoid(x · w_s) (Qwen3-Next's `shared_expert_gate`; `zoo.config.facts.moe_shared`).

Dispatch: each token's k (token, slot) pairs are sorted by expert (a stable sort: within an
expert, token order), gathered, and every expert multiplies its contiguous rows; the outputs,
weighted by the gate, are added back to their tokens. On the CPU (and in float32) a loop over
the experts does the multiplies (its row counts are read on the host, free there); on CUDA in
bfloat16 one grouped GEMM (`torch.nn.functional.grouped_mm`) over all experts, with its offsets
on the device. Under torch.compile the loop's row counts (`.tolist()`, a data-dependent value)
break the graph in each mixture layer; the grouped path reads nothing on the host. Expert
parallelism (experts on different ranks, tokens sent by all-to-all) is not built: every rank
holds (its FSDP shard of) every expert.

In training each forward keeps its auxiliary losses (`last_losses`, with gradients: the task
adds them to the loss with task.moe_balance and task.moe_router_z) and its routing statistics
(`load`, `dropped`, `entropy`: detached buffers, no host sync; `zoo.training.monitor.routing`
logs them). Shapes: B T D as elsewhere, N = B·T tokens, E experts, K = top-k, F the expert width."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import is_fake

from zoo.config.facts.activations import ACTIVATION_FACTS
from zoo.config.facts.ffn import FFN_FACTS, FFNKind, MoEGate, expert_width
from zoo.config.facts.moe_routing import MoEBalance
from zoo.config.facts.moe_shared import MoESharedGate
from zoo.config.schema.model import ModelConfig

_GROUPED_MM = getattr(F, "grouped_mm", None) or getattr(torch, "_grouped_mm", None)


class RouterLosses(NamedTuple):
    """One forward's auxiliary losses of a mixture layer (scalars, with gradients).

    - `balance`: Switch's load-balancing loss E · Σ_i f_i · P_i, f_i the fraction of the N·K
      routed slots that chose expert i (before any capacity drop), P_i the mean router
      probability of i over the tokens (sigmoid gates: each token's scores normalised to sum 1);
      1 when routing is uniform, E when one expert takes everything.
    - `z`: the router z-loss, the mean over tokens of logsumexp(router logits)².
    - `sequence`: DeepSeek-V3's sequence-wise balancing loss (eq. 17-20): `balance` within each
      sequence of the batch (its T tokens), the mean over sequences; 1 when uniform."""

    balance: torch.Tensor
    z: torch.Tensor
    sequence: torch.Tensor


class Experts(nn.Module):
    """E feed-forward units stacked in two parameters: w_in (E, F or 2·F, D) and w_out (E, D, F)."""

    decayed_matrices = ("w_in", "w_out")  # matrices: weight decay as a linear layer's weight
    starts = FFN_FACTS[FFNKind.moe].starts  # how they start: the moe row's

    def __init__(self, n_experts: int, d_model: int, d_ff: int, activation, act: Callable, dropout: float) -> None:
        super().__init__()
        self.gated = ACTIVATION_FACTS[activation].gated
        self.act = act  # the activation's function (`zoo.nn.feedforward.ACTIVATIONS`)
        inner = 2 * d_ff if self.gated else d_ff
        self.w_in = nn.Parameter(torch.empty(n_experts, inner, d_model))
        self.w_out = nn.Parameter(torch.empty(n_experts, d_model, d_ff))
        self.dropout = nn.Dropout(dropout)

    def hidden(self, h: torch.Tensor) -> torch.Tensor:
        """act(h), or gated act(gate) ⊙ up of h (n, 2·F) = [gate | up] -> (n, F)."""
        if self.gated:
            gate, up = h.chunk(2, dim=-1)  # (n, F) each
            return self.dropout(self.act(gate) * up)
        return self.dropout(self.act(h))

    def forward(
        self, rows: torch.Tensor, *, counts: list[int] | None = None, ends: torch.Tensor | None = None
    ) -> torch.Tensor:
        """rows (M, D) sorted by expert -> (M, D): the grouped GEMM given the cumulative row
        counts `ends` on the device, else the loop given them on the host (`counts`)."""
        if ends is not None:
            return self.grouped(rows, ends)
        if counts is None:
            raise ValueError("Experts needs the row counts per expert: `counts` (host) or `ends` (device)")
        return self.loop(rows, counts)

    def loop(self, rows: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """rows (M, D) sorted by expert, counts[i] of them for expert i (their sum <= M; rows past
        it, dropped, come back as 0) -> (M, D): one pair of matmuls per expert with rows."""
        parts, start = [], 0
        # one view per expert, taken at once: backward stacks their gradients in one tensor (indexing
        # w_in[i] per expert would make a whole (E, ...) gradient for each)
        w_in, w_out = self.w_in.unbind(0), self.w_out.unbind(0)
        for i, n in enumerate(counts):
            if n:
                h = self.hidden(F.linear(rows[start : start + n], w_in[i]))  # (n, F)
                parts.append(F.linear(h, w_out[i]))  # (n, D)
            start += n
        if start < rows.shape[0]:
            parts.append(rows.new_zeros(rows.shape[0] - start, rows.shape[1]))  # (M - kept, D)
        return torch.cat(parts) if parts else torch.zeros_like(rows)  # (M, D)

    def grouped(self, rows: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
        """rows (M, D) sorted by expert, ends (E,) int32 the cumulative row counts -> (M, D) in
        bfloat16: two grouped GEMMs over all experts; rows past ends[-1] come back as 0."""
        if _GROUPED_MM is None:  # `MoE` takes this path only where torch has the kernel
            raise RuntimeError("this torch has no grouped GEMM (torch.nn.functional.grouped_mm)")
        dtype = torch.bfloat16
        h = _GROUPED_MM(rows.to(dtype), self.w_in.to(dtype).transpose(-2, -1), offs=ends)  # (M, F or 2·F)
        out = _GROUPED_MM(self.hidden(h), self.w_out.to(dtype).transpose(-2, -1), offs=ends)  # (M, D)
        kept = torch.arange(rows.shape[0], device=rows.device) < ends[-1]  # (M,)
        return torch.where(kept[:, None], out, 0)


class Router(nn.Linear):
    """The router: logits W·x (its weight (E, D), no bias: Mixtral's `gate.weight`), scored by
    the gate (softmax over the E logits, or a sigmoid each); each token's top k experts chosen by
    the scores plus, under model.moe_balance=bias, the selection bias `score_bias` (E,) (a buffer,
    DeepSeek-V3's `e_score_correction_bias`), within its `top_groups` best of `groups` groups of
    experts (a group scored by the sum of its two best biased scores: DeepSeek-V3's group-limited
    routing); their weights the unbiased scores, renormalised to sum 1 with `renorm`, times
    `scale` (DeepSeek-V3's routed_scaling_factor)."""

    score_bias: torch.Tensor | None

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg.d_model, cfg.moe_experts, bias=False)
        self.top_k, self.gate, self.renorm = cfg.moe_top_k, cfg.moe_gate, cfg.moe_renorm
        self.groups, self.top_groups, self.scale = cfg.moe_groups, cfg.moe_top_groups, cfg.moe_scale
        if cfg.moe_balance == MoEBalance.bias:  # saved in checkpoints: routing depends on it
            self.register_buffer("score_bias", torch.zeros(cfg.moe_experts), persistent=True)  # (E,)
        else:
            self.score_bias = None

    def reset_parameters(self) -> None:
        super().reset_parameters()
        score_bias = getattr(self, "score_bias", None)
        if score_bias is not None:
            score_bias.zero_()

    # a Linear for its weight, initialisation and checkpoint key, with outputs of its own
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:  # type: ignore[override]
        """x (N, D) -> (logits (N, E) float32, probabilities (N, E) (sigmoid: each token's scores
        normalised to sum 1), top-k weights (N, K), experts (N, K))."""
        logits = super().forward(x).float()  # (N, E)
        if self.gate == MoEGate.softmax:
            scores = probs = logits.softmax(dim=-1)  # (N, E)
        else:
            scores = logits.sigmoid()  # (N, E)
            probs = scores / scores.sum(dim=-1, keepdim=True)
        if self.score_bias is None and self.groups == 1:
            weights, experts = scores.topk(self.top_k, dim=-1)  # (N, K) each
        else:
            experts = self.choose(scores)  # (N, K)
            weights = scores.gather(1, experts)  # (N, K): the gate's scores, without the bias
        if self.renorm:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        if self.scale != 1.0:
            weights = weights * self.scale
        return logits, probs, weights, experts

    def choose(self, scores: torch.Tensor) -> torch.Tensor:
        """scores (N, E) -> the experts (N, K) of the top-k of scores + score_bias, within each
        token's top_groups groups (G groups of E/G experts, scored by their two best)."""
        choice = scores if self.score_bias is None else scores + self.score_bias  # (N, E)
        if self.groups > 1:
            N, E = choice.shape
            grouped = choice.view(N, self.groups, E // self.groups)  # (N, G, E/G)
            group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)  # (N, G)
            picked = group_scores.topk(self.top_groups, dim=-1).indices  # (N, top_groups)
            keep = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, picked, True)  # (N, G)
            choice = grouped.masked_fill(~keep[:, :, None], float("-inf")).view(N, E)  # (N, E)
        return choice.topk(self.top_k, dim=-1).indices  # (N, K)

    def extra_repr(self) -> str:
        extra = f", groups={self.groups}, top_groups={self.top_groups}" if self.groups > 1 else ""
        scale = f", scale={self.scale}" if self.scale != 1.0 else ""
        bias = ", score_bias" if self.score_bias is not None else ""
        return (
            f"{super().extra_repr()}, top_k={self.top_k}, gate={self.gate.value}, renorm={self.renorm}"
            f"{extra}{scale}{bias}"
        )


class MoE(nn.Module):
    """x (B, T, D) -> (B, T, D): Σ over each token's top-k experts of gate weight · expert(x),
    plus the shared experts' output. See the module docstring. `act` is the activation's function
    and `shared` the shared experts' dense unit (None without), both from the builder in
    `zoo.nn.feedforward.FFNS`, which this module does not import (it imports this one)."""

    load: torch.Tensor  # buffers: the last training forward's routing statistics
    dropped: torch.Tensor
    entropy: torch.Tensor
    pending: torch.Tensor

    def __init__(self, cfg: ModelConfig, *, act: Callable, shared: nn.Module | None) -> None:
        super().__init__()
        self.n_experts, self.top_k = cfg.moe_experts, cfg.moe_top_k
        self.gate, self.renorm, self.capacity_factor = cfg.moe_gate, cfg.moe_renorm, cfg.moe_capacity
        width = expert_width(cfg, cfg.d_ff)
        self.router = Router(cfg)
        self.balance, self.bias_rate = cfg.moe_balance, cfg.moe_bias_rate
        self.experts = Experts(cfg.moe_experts, cfg.d_model, width, cfg.activation, act, cfg.dropout)
        self.shared = shared  # moe_shared · width wide, every token passes through it
        gated = shared is not None and cfg.moe_shared_gate == MoESharedGate.sigmoid
        self.shared_gate = nn.Linear(cfg.d_model, 1, bias=False) if gated else None  # w_s (1, D)
        self.dispatch = "auto"  # auto: grouped GEMM on CUDA in bfloat16, else the loop; or "loop", "grouped"
        self.last_losses: RouterLosses | None = None
        # routing statistics of the last training forward (detached, on the device; not in checkpoints)
        self.register_buffer("load", torch.zeros(cfg.moe_experts), persistent=False)  # (E,) share of slots
        self.register_buffer("dropped", torch.zeros(()), persistent=False)  # share of slots dropped
        self.register_buffer("entropy", torch.zeros(()), persistent=False)  # mean router entropy (nats)
        # model.moe_balance=bias: the slots each expert took since the last bias update (every
        # micro-batch of an optimizer step; zero at a step's end, where checkpoints are taken)
        self.register_buffer("pending", torch.zeros(cfg.moe_experts), persistent=False)  # (E,)

    def capacity(self, n_tokens: int) -> int | None:
        """The slots one expert takes of a training forward over `n_tokens` tokens: ceil(c · N · K
        / E). Evaluation is dropless: a cached decoding step (N = B tokens) would otherwise drop
        what the whole sequence's forward keeps."""
        if self.capacity_factor is None:
            return None
        return math.ceil(self.capacity_factor * n_tokens * self.top_k / self.n_experts)

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (N, D) -> the router's (logits, probabilities, top-k weights, experts) (`Router`)."""
        return self.router(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1])  # (N, D)
        N, E, K = x.shape[0], self.n_experts, self.top_k
        logits, probs, weights, experts = self.route(x)
        slots = experts.reshape(-1)  # (N·K,) the expert of each (token, slot), token-major
        order = slots.argsort(stable=True)  # (N·K,) slots sorted by expert, token order within one
        counts = torch.zeros(E, dtype=torch.long, device=x.device).scatter_add_(
            0, slots, torch.ones_like(slots)
        )  # (E,) slots per expert (bincount's size would depend on the data)
        token = order // K  # (N·K,) the token of each sorted slot
        weight = weights.reshape(-1)[order]  # (N·K,)
        capacity = self.capacity(N) if self.training else None  # evaluation and decoding: dropless
        kept_counts = counts if capacity is None else counts.clamp(max=capacity)  # (E,)
        if capacity is not None:  # a slot whose rank within its expert reaches the capacity is dropped
            starts = counts.cumsum(0) - counts  # (E,) the first sorted slot of each expert
            rank = torch.arange(N * K, device=x.device) - starts[slots[order]]  # (N·K,)
            kept = rank < capacity  # (N·K,)
            # kept slots first (each expert's in order), dropped ones after the last expert's
            regroup = torch.where(kept, slots[order], E).argsort(stable=True)  # (N·K,)
            token, weight = token[regroup], torch.where(kept, weight, 0.0)[regroup]
        rows = x.index_select(0, token)  # (N·K, D) each slot's token, grouped by expert
        if self._grouped(x):
            out = self.experts(rows, ends=kept_counts.cumsum(0).to(torch.int32)).to(x.dtype)  # (N·K, D)
        else:
            # under autocast the experts give bf16: back to the stream's dtype for the sum
            out = self.experts(rows, counts=self._host_counts(kept_counts, N, capacity)).to(x.dtype)  # (N·K, D)
        out = out * weight.to(out.dtype)[:, None]  # (N·K, D)
        y = torch.zeros_like(x).index_add_(0, token, out)  # (N, D)
        if self.shared is not None:
            shared = self.shared(x)  # (N, D)
            if self.shared_gate is not None:
                shared = torch.sigmoid(self.shared_gate(x)) * shared  # (N, 1) · (N, D)
            y = y + shared
        if self.training:
            self._record(logits, probs, counts, kept_counts, experts, shape)
        return y.reshape(shape)  # (B, T, D)

    def _host_counts(self, kept_counts: torch.Tensor, N: int, capacity: int | None) -> list[int]:
        """The loop's row counts per expert, read on the host; on fake tensors (zoo-plan's step,
        which reads no values) the N·K slots spread evenly over the experts (at most `capacity`
        each), so that the plan holds the expert activations of a balanced dropless step."""
        if not torch.compiler.is_compiling() and is_fake(kept_counts):
            even, extra = divmod(N * self.top_k, self.n_experts)
            counts = [even + (i < extra) for i in range(self.n_experts)]
            return counts if capacity is None else [min(n, capacity) for n in counts]
        return kept_counts.tolist()

    def _grouped(self, x: torch.Tensor) -> bool:
        """Whether this forward takes the grouped GEMM: asked for, or by default on CUDA when the
        experts compute in bfloat16 (the grouped kernels' type: bfloat16 inputs or autocast)."""
        if self.dispatch != "auto":
            return self.dispatch == "grouped"
        if _GROUPED_MM is None or not x.is_cuda:
            return False
        bf16 = x.dtype == torch.bfloat16 or (
            torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda") == torch.bfloat16
        )
        return bf16

    def _record(
        self,
        logits: torch.Tensor,
        probs: torch.Tensor,
        counts: torch.Tensor,
        kept_counts: torch.Tensor,
        experts: torch.Tensor,
        shape: torch.Size,
    ) -> None:
        """Keep this training forward's auxiliary losses and routing statistics."""
        slots = counts.sum().clamp(min=1)
        share = counts.float() / slots  # (E,) f_i, before drops
        E, K = self.n_experts, self.top_k
        T = shape[-2] if len(shape) > 2 else logits.shape[0]  # a sequence's tokens
        per_sequence = experts.reshape(-1, T * K)  # (B, T·K)
        picked = torch.zeros(per_sequence.shape[0], E, device=logits.device).scatter_add_(
            1, per_sequence, torch.ones_like(per_sequence, dtype=torch.float)
        )  # (B, E) slots per expert in each sequence
        self.last_losses = RouterLosses(
            balance=E * (share * probs.mean(dim=0)).sum(),
            z=torch.logsumexp(logits, dim=-1).square().mean(),
            sequence=(picked * E / (K * T) * probs.reshape(-1, T, E).mean(dim=1)).sum(dim=-1).mean(),
        )
        with torch.no_grad():
            if self.balance == MoEBalance.bias:  # (a recomputing backward, checkpoint_activations, counts a
                # forward twice: every count doubles, and the update's signs stay the same)
                self.pending.add_(counts.float())
            self.load.copy_(share)
            self.dropped.copy_(1.0 - kept_counts.sum().float() / slots)
            entropy = -(probs * probs.clamp(min=1e-20).log()).sum(dim=-1)  # (N,)
            self.entropy.copy_(entropy.mean())

    @torch.no_grad()
    def update_bias(self, counts: torch.Tensor) -> None:
        """b_i += u·sign(mean load − load_i) (Wang et al. 2024, Algorithm 1), `counts` (E,) the
        slots each expert took over the step (every micro-batch and rank), u = model.moe_bias_rate;
        `pending` starts over."""
        score_bias = self.router.score_bias
        assert score_bias is not None, "update_bias needs model.moe_balance=bias"
        counts = counts.float()
        score_bias.add_(self.bias_rate * torch.sign(counts.mean() - counts))
        self.pending.zero_()

    def extra_repr(self) -> str:
        return (
            f"experts={self.n_experts}, top_k={self.top_k}, gate={self.gate.value}, renorm={self.renorm}, "
            f"capacity={self.capacity_factor}"
        )


def moe_layers(model: nn.Module) -> list[MoE]:
    """The mixture layers of `model`, in module order (an encoder-decoder's encoder first)."""
    return [m for m in model.modules() if isinstance(m, MoE)]


def router_losses(model: nn.Module) -> RouterLosses | None:
    """The mean over `model`'s mixture layers of their last training forward's auxiliary losses
    (each then weighs the same whatever the depth); None without mixture layers or losses. Each
    layer's are handed out once (read, then cleared), so a forward without them is not counted
    twice."""
    found = []
    for layer in moe_layers(model):
        if layer.last_losses is not None:
            found.append(layer.last_losses)
            layer.last_losses = None
    if not found:
        return None
    return RouterLosses(*(torch.stack([f[i] for f in found]).mean() for i in range(len(RouterLosses._fields))))


def balance_experts(
    model: nn.Module, reduce: Callable[[torch.Tensor], torch.Tensor] | None = None
) -> torch.Tensor | None:
    """After an optimizer step: each mixture layer under model.moe_balance=bias updates its
    selection bias from the slots its experts took since the last update, summed by `reduce`
    over the data-parallel ranks (one all-reduce for all layers), so that every rank applies the
    same update. -> those counts (L, E) (None: no layer balances by bias)."""
    layers = [layer for layer in moe_layers(model) if layer.balance == MoEBalance.bias]
    if not layers:
        return None
    counts = torch.stack([layer.pending for layer in layers])  # (L, E)
    if reduce is not None:
        counts = reduce(counts)
    for layer, row in zip(layers, counts.unbind(0)):
        layer.update_bias(row)
    return counts
