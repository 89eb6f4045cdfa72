"""Hyper-connections (Zhu et al. 2024, "Hyper-Connections"): n residual streams instead of one,
joined at every residual site by learned width-connections (which mix of the streams a branch
reads, and how the streams mix among themselves) and depth-connections (how much of the branch's
output each stream takes). Static (SHC) or dynamic (DHC: the weights also read the streams).
Rows: `zoo.config.facts.residuals.HYPER_FACTS`.

A stack with `model.residual_streams` = n > 1 carries H (B, T, n, D): the embeddings copied n
times (`expand`), summed back to (B, T, D) before the final norm (`reduce`). Each residual site
of a block (`zoo.nn.block.Block`: one per sub-layer, one for a parallel block's branches) holds
a `HyperConnection`, which computes the site's branch input h = αᵀ[:, 0]·H, runs the branch
(the norms of model.norm's placement around the sub-layer, `SubLayer.branch`) and returns
αᵀ[:, 1:]·H + β ⊗ f(h). With n = 1 none of this is built: the plain residual x + f(x)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from zoo.config.facts.residuals import HYPER_FACTS, HyperConnections, residual_sites
from zoo.config.schema.model import ModelConfig
from zoo.nn.norm import build_norm


class HyperConnection(nn.Module):
    """One residual site's connections over n streams. `site`: its index in the stack, which
    picks the stream its branch reads at the start (e_(site mod n), as the paper's layer index)."""

    alpha_start: torch.Tensor  # the buffer register_buffer adds, declared so its type is known

    def __init__(self, cfg: ModelConfig, site: int) -> None:
        super().__init__()
        n, D = cfg.residual_streams, cfg.d_model
        self.dynamic = cfg.hyper_connections == HyperConnections.dynamic
        self.starts = HYPER_FACTS[cfg.hyper_connections].starts
        start = torch.cat([torch.zeros(n, 1), torch.eye(n)], dim=1)  # (n, n + 1): [e_(site mod n) | I]
        start[site % n, 0] = 1.0
        self.register_buffer("alpha_start", start, persistent=False)
        self.alpha = nn.Parameter(torch.empty(n, n + 1))  # (n, n + 1) α - its start (starts at zero)
        self.beta = nn.Parameter(torch.empty(n))  # (n,) β
        if self.dynamic:
            self.norm = build_norm(cfg.norm_type, D, cfg.norm_eps, cfg.bias)
            self.alpha_fn = nn.Parameter(torch.empty(D, n + 1))  # (D, n + 1) W_α
            self.beta_fn = nn.Parameter(torch.empty(D, 1))  # (D, 1) W_β
            self.alpha_scale = nn.Parameter(torch.empty(1))  # (1,) s_α (FSDP2 shards no 0-d parameter)
            self.beta_scale = nn.Parameter(torch.empty(1))  # (1,) s_β

    def weights(self, streams: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(α, β) for streams (B, T, n, D): static (n, n + 1), (n,); dynamic (B, T, n, n + 1),
        (B, T, n)."""
        alpha = self.alpha_start.to(self.alpha.dtype) + self.alpha  # (n, n + 1)
        if not self.dynamic:
            return alpha, self.beta
        normed = self.norm(streams)  # (B, T, n, D)
        alpha = alpha + self.alpha_scale * torch.tanh(normed @ self.alpha_fn)  # (B, T, n, n + 1)
        beta = self.beta + self.beta_scale * torch.tanh(normed @ self.beta_fn).squeeze(-1)  # (B, T, n)
        return alpha, beta

    def forward(self, streams: torch.Tensor, branch: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """streams (B, T, n, D), branch (B, T, D) -> (B, T, D) -> streams (B, T, n, D)."""
        alpha, beta = self.weights(streams)
        mixed = alpha.transpose(-2, -1).to(streams.dtype) @ streams  # (B, T, n + 1, D)
        out = branch(mixed[..., 0, :])  # (B, T, D)
        return mixed[..., 1:, :] + beta.to(out.dtype)[..., :, None] * out[..., None, :]  # (B, T, n, D)


def block_connections(cfg: ModelConfig, layer: int, *, cross: bool) -> nn.ModuleList | None:
    """The connections of block `layer`'s residual sites (None: one stream, the plain residual)."""
    if cfg.hyper_connections == HyperConnections.none:
        return None
    sites = residual_sites(cfg, cross=cross)
    return nn.ModuleList(HyperConnection(cfg, layer * sites + j) for j in range(sites))


def expand(x: torch.Tensor, n: int) -> torch.Tensor:
    """(B, T, D) -> (B, T, n, D): the n streams start as copies (n = 1: x itself)."""
    return x if n == 1 else x.unsqueeze(-2).expand(*x.shape[:-1], n, x.shape[-1])


def reduce(streams: torch.Tensor, n: int) -> torch.Tensor:
    """(B, T, n, D) -> (B, T, D): the streams summed (n = 1: as they are)."""
    return streams if n == 1 else streams.sum(dim=-2)
