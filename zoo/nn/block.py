"""Transformer layers and stacks of them.

A block is self-attention, optional cross-attention, and a feed-forward sub-layer, each wrapped
in a residual connection with normalization before (pre-LN: x + f(norm(x)); Xiong et al. 2020),
after (post-LN: norm(x + f(x)); Vaswani et al. 2017), on both sides of f (sandwich: x +
norm_out(f(norm_in(x))); Gemma 2) or on f's output (reordered: x + norm(f(x)); OLMo 2): rows of
`zoo.config.facts.placements`. The sub-layers run one after the other (model.block=sequential)
or side by side on the block's input, their outputs added to one residual (parallel, with
shared norms: GPT-J, PaLM; parallel_two_norms, each its own: GPT-NeoX): rows of
`zoo.config.facts.blocks`. Every layer is built from the config, never copied from a prototype,
so layers start with independent weights.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from zoo.config.facts.attention import AttentionKind, is_recurrent, layer_mixers, stack_windows
from zoo.config.facts.blocks import BLOCK_FACTS
from zoo.config.facts.ffn import FFNKind, layer_kinds
from zoo.config.facts.kv import KVKind
from zoo.config.facts.placements import PLACEMENT_FACTS
from zoo.config.schema.model import ModelConfig, NormPlacement
from zoo.nn.attention import Attention
from zoo.nn.cache import Cache, LayerCache, SlidingKVCache, SlidingStaticKVCache
from zoo.nn.documents import DocumentMask
from zoo.nn.feedforward import build_ffn
from zoo.nn.flex import band_block_mask, use_flex
from zoo.nn.host import host_reads_are_free
from zoo.nn.hyper import block_connections, expand, reduce
from zoo.nn.latent_attention import LatentAttention
from zoo.nn.mask import attention_mask
from zoo.nn.mixers import build_mixer
from zoo.nn.norm import build_norm
from zoo.nn.position import PositionScheme, build_positions
from zoo.nn.position.base import SharedBias
from zoo.nn.position.none import NoPositions
from zoo.nn.values import ValueHook, ValueStream

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask


class SubLayer(nn.Module):
    """Residual connection with its norm(s) and dropout around one sub-layer function.

    `norm` is the placement's one norm (pre: the input's, post: the sum's, reordered: the
    output's; sandwich: the input's), `norm_out` sandwich's norm of the output."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.placement = cfg.norm
        self.norm = build_norm(cfg.norm_type, cfg.d_model, cfg.norm_eps, cfg.bias)
        if PLACEMENT_FACTS[cfg.norm].norms_per_sublayer == 2:
            self.norm_out = build_norm(cfg.norm_type, cfg.d_model, cfg.norm_eps, cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def branch(self, x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """What the residual adds to x (every placement but post): (B, T, D) -> (B, T, D)."""
        if self.placement == NormPlacement.pre:
            return self.dropout(fn(self.norm(x)))
        if self.placement == NormPlacement.sandwich:
            return self.dropout(self.norm_out(fn(self.norm(x))))
        if self.placement == NormPlacement.reordered:
            return self.dropout(self.norm(fn(x)))
        raise ValueError(f"model.norm={self.placement.value} normalizes the sum, not a branch")

    def forward(self, x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.placement == NormPlacement.post:
            return self.norm(x + self.dropout(fn(x)))
        return x + self.branch(x, fn)


class Block(nn.Module):
    """Encoder block (cross=False) or decoder block with cross-attention (cross=True).

    Shapes: x (B, T, D), memory (B, S, D) -> (B, T, D).
    """

    def __init__(
        self, cfg: ModelConfig, *, cross: bool, ffn: FFNKind | None = None, mixer: AttentionKind | None = None
    ) -> None:
        """`mixer`: the layer's kind (`zoo.config.facts.attention.layer_mixers`); a recurrent one
        (Gated DeltaNet) takes self-attention's place (`zoo.nn.mixers`), None is attention."""
        super().__init__()
        heads: dict[str, Any] = dict(
            d_model=cfg.d_model,
            n_heads=cfg.n_heads,
            n_kv_heads=cfg.n_kv_heads,
            head_dim=cfg.head_dim,
            bias=cfg.bias,
            dropout=cfg.dropout,
            scale=cfg.attention_multiplier,  # attention_scale; under mup sqrt(base Dh)/Dh
        )
        qk: dict[str, Any] = dict(
            qk_norm=cfg.qk_norm, qk_norm_type=cfg.qk_norm_kind, norm_eps=cfg.norm_eps, softcap=cfg.attn_softcap
        )
        qk.update(sink=cfg.attn_sink, gate=cfg.attn_gate)  # zoo.nn.sink, zoo.nn.gate
        facts = BLOCK_FACTS[cfg.block]
        self.parallel = facts.parallel
        # a parallel block with shared norms holds one SubLayer (`self_attn_sub`) for all branches
        own = not facts.shared_norms
        # model.kv=latent: multi-head latent attention (zoo.nn.latent_attention) in place of per-head keys
        self.recurrent = mixer is not None and is_recurrent(mixer)
        if mixer is not None and self.recurrent:
            self.self_attn: nn.Module = build_mixer(cfg, mixer)
        else:
            self.self_attn = LatentAttention(cfg) if cfg.kv == KVKind.latent else Attention(**heads, **qk)
        self.self_attn_sub = SubLayer(cfg)
        self.cross_attn = Attention(**heads, **qk, cross=True) if cross else None
        self.cross_attn_sub = SubLayer(cfg) if cross and own else None
        self.ff = build_ffn(cfg, ffn)  # `ffn`'s unit, default model.ffn's (zoo.nn.feedforward.FFNS)
        self.ff_sub = SubLayer(cfg) if own else None
        self.hyper: nn.ModuleList | None = None  # one per residual site over n streams (`zoo.nn.hyper`), set by Stack

    def forward(
        self,
        x: torch.Tensor,
        *,
        positions: torch.Tensor,
        position: PositionScheme,
        mask: torch.Tensor | None,
        causal: bool,
        memory: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        cache: LayerCache | None = None,
        values: ValueHook | None = None,
        key_padding: torch.Tensor | None = None,
        document_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`values`: the hook of the value residual and value embeddings (`zoo.nn.values`) on
        the self-attention's values; with hyper-connections x is the streams (B, T, n, D).
        `key_padding` (B, past + T) and `document_ids` (B, T) reach a recurrent layer, whose
        state stands for the mask (attention layers take `mask`)."""

        # the value hook reaches per-head attention only (latent attention refuses the value options)
        hook = {} if values is None else {"values": values}

        def self_attn(h: torch.Tensor) -> torch.Tensor:
            if self.recurrent:
                state = cache.state if cache is not None else None
                return self.self_attn(h, state=state, padding=key_padding, document_ids=document_ids)
            return self.self_attn(
                h, positions=positions, position=position, mask=mask, causal=causal, cache=cache, **hook
            )

        def cross_attn(h: torch.Tensor) -> torch.Tensor:
            assert self.cross_attn is not None  # called only by a block with cross-attention
            return self.cross_attn(
                h, positions=positions, position=_NO_POSITIONS, mask=memory_mask, memory=memory, cache=cache
            )

        if self.parallel:
            return self._parallel(x, self_attn, cross_attn)
        x = self._residual(0, self.self_attn_sub, x, self_attn)
        if self.cross_attn_sub is not None:  # a block with cross-attention (its norms its own)
            x = self._residual(1, self.cross_attn_sub, x, cross_attn)
        assert self.ff_sub is not None  # norms of its own: shared ones take `_parallel`
        return self._residual(-1, self.ff_sub, x, self.ff)

    def _residual(self, site: int, sub: SubLayer, x: torch.Tensor, fn: Callable) -> torch.Tensor:
        """`sub`'s residual connection around `fn`; with hyper-connections, residual site `site`'s
        over the streams x (B, T, n, D)."""
        if self.hyper is None:
            return sub(x, fn)
        return self.hyper[site](x, lambda h: sub.branch(h, fn))

    def _parallel(self, x: torch.Tensor, self_attn: Callable, cross_attn: Callable) -> torch.Tensor:
        """Every sub-layer reads the block's input x (B, T, D); their outputs add to one residual:
        through the one shared SubLayer (its norms applied once to the input and once to the
        branches' sum), or each through its own (`SubLayer.branch`)."""
        fns = [self_attn] + ([cross_attn] if self.cross_attn is not None else []) + [self.ff]
        if self.ff_sub is None:  # shared norms
            return self._residual(0, self.self_attn_sub, x, lambda h: sum(fn(h) for fn in fns))
        subs = [self.self_attn_sub] + ([self.cross_attn_sub] if self.cross_attn_sub is not None else []) + [self.ff_sub]
        if self.hyper is not None:  # one site for all the branches
            return self.hyper[0](x, lambda h: sum(sub.branch(h, fn) for sub, fn in zip(subs, fns)))
        return x + sum(sub.branch(x, fn) for sub, fn in zip(subs, fns))


_NO_POSITIONS = NoPositions()


class Stack(nn.Module):
    """n_layers blocks with their position scheme(s) and, for every placement but post-LN, a
    final norm.

    Input x is already-embedded tokens (B, T, D); the position scheme's `embed` hook is applied
    here, its `attend` hook inside every self-attention. `key_padding` (B, S) covers the cached
    and the new keys (1 = token, 0 = pad).
    """

    def __init__(self, cfg: ModelConfig, *, n_layers: int, causal: bool, cross: bool) -> None:
        super().__init__()
        self.causal = causal
        self.checkpoint_activations = cfg.checkpoint_activations
        # each layer's mixer (`zoo.config.facts.attention.layer_mixers`): attention or recurrent
        self.mixers = layer_mixers(cfg, n_layers)
        self.recurrent = [is_recurrent(kind) for kind in self.mixers]
        self.layers = nn.ModuleList(
            Block(cfg, cross=cross, ffn=kind, mixer=mixer)
            for kind, mixer in zip(layer_kinds(cfg, n_layers), self.mixers)
        )
        # hyper-connections and the value options (model.residual_streams, value_residual, value_embeds)
        self.streams = cfg.residual_streams
        for i, layer in enumerate(self.layers):
            cast(Block, layer).hyper = block_connections(cfg, i, cross=cross)
        self.values = ValueStream(cfg, n_layers) if ValueStream.wanted(cfg) else None
        # sliding-window attention: each layer's window (None = full); one window per stack
        self.windows = stack_windows(cfg, n_layers)
        self.window = next((w for w in self.windows if w is not None), None)
        self.position_kind, self.attention_dropout = cfg.position.kind, cfg.dropout
        self.positions = nn.ModuleList(build_positions(cfg, causal=causal, n_layers=n_layers))
        self.dropout = nn.Dropout(cfg.dropout)
        self.embed_norm = (
            build_norm(cfg.norm_type, cfg.d_model, cfg.norm_eps, cfg.bias) if cfg.embed_norm else nn.Identity()
        )
        final = PLACEMENT_FACTS[cfg.norm].final_norm  # every placement but post
        self.final_norm = build_norm(cfg.norm_type, cfg.d_model, cfg.norm_eps, cfg.bias) if final else nn.Identity()
        # packed documents: sdpa (the boolean mask) unless set to flex; FlexAttention is taken on no
        # device by itself until its compiled GPU path is measured equal (tests/gpu/test_document_mask_cuda.py)
        self.document_kernel: str | None = None
        # sliding layers: the measured CPU rule of zoo.nn.flex unless set to flex or sdpa; flex in
        # training is opt-in until its compiled GPU step is measured (benchmarks/sliding_train.py)
        self.sliding_kernel: str | None = None

    def position_for(self, layer: int) -> PositionScheme:
        return cast(PositionScheme, self.positions[layer if len(self.positions) > 1 else 0])

    def _static_cache_mask(
        self, cache: Cache, T: int, key_padding: torch.Tensor | None, device: torch.device
    ) -> torch.Tensor:
        """(B or 1, 1, T, capacity) bool: which of a static cache's slots each of the T new
        queries sees. Without padding, from the cache's slot tensor alone (the same graph at
        every step); with a (B, past + T) padding mask, whose width tells the past."""
        capacity = cache.capacity
        assert capacity is not None  # a static cache's
        if key_padding is not None:
            past = key_padding.shape[1] - T
            mask = attention_mask(
                q_len=T,
                k_len=past + T,
                causal=self.causal,
                key_padding=key_padding,
                device=device,
            )  # (B, 1, T, past + T)
            assert mask is not None  # key padding given: always a mask
            return F.pad(mask, (0, capacity - past - T), value=False)  # (B, 1, T, capacity)
        first = cache.slot if cache.slot is not None else torch.zeros((), dtype=torch.long, device=device)
        keys = torch.arange(capacity, device=device)  # (capacity,)
        queries = first + torch.arange(T, device=device)  # (T,) the slots the new tokens take
        seen = keys[None, :] <= queries[:, None] if self.causal else keys[None, :] < first + T  # (T, capacity)
        return seen[None, None]  # (1, 1, T, capacity)

    def _sliding_mask(
        self, cache: Cache | None, T: int, key_padding: torch.Tensor | None, device: torch.device
    ) -> tuple[torch.Tensor | BlockMask | None, bool]:
        """(mask, causal) of the sliding layers: the band of `self.window` over the keys their
        caches return (`SlidingKVCache`: the kept ones and the T new; `SlidingStaticKVCache`:
        its ring at a one-token step). Where the band holds every key, the full layers' path."""
        W = self.window
        assert W is not None  # called by a stack with sliding layers only
        if cache is None:
            covers = T <= W if self.causal else (W - 1) // 2 >= T - 1
            if key_padding is None and covers:
                return None, self.causal
            if use_flex(
                T=T,
                window=W,
                device=device,
                position=self.position_kind,
                padded=key_padding is not None,
                dropout=self.attention_dropout if self.training else 0.0,
                kernel=self.sliding_kernel,
            ):
                return band_block_mask(W, self.causal, T, device), False
            return attention_mask(
                q_len=T, k_len=T, causal=self.causal, key_padding=key_padding, device=device, window=W
            ), False  # (B or 1, 1, T, T)
        layer = cache.layers[self.windows.index(W)].self_attn
        if cache.static and T == 1:
            return self._ring_mask(layer, key_padding, device), False
        if isinstance(layer, SlidingStaticKVCache):  # cache.static
            kept = min(cache.length, layer.ring)
        else:
            kept = cast(SlidingKVCache, layer).kept
        padding = key_padding[:, -(kept + T) :] if key_padding is not None else None  # (B, kept + T)
        if padding is None and kept + T <= W:
            return None, self.causal and T > 1
        return attention_mask(
            q_len=T, k_len=kept + T, causal=self.causal, key_padding=padding, device=device, window=W
        ), False  # (B or 1, 1, T, kept + T)

    @staticmethod
    def _ring_mask(layer, key_padding: torch.Tensor | None, device: torch.device) -> torch.Tensor:
        """(B or 1, 1, 1, ring) bool: the slots of a sliding layer's static ring that one new
        query sees (every written slot: the ring is no longer than the window). Without
        padding from the slot tensor alone (one graph at every step); with a (B, past + 1)
        padding mask, each slot's key is the latest position n <= past with n = slot mod ring."""
        slots = torch.arange(layer.ring, device=device)  # (R,)
        if key_padding is None:
            first = layer.slot if layer.slot is not None else torch.zeros((), dtype=torch.long, device=device)
            return (slots <= first)[None, None, None]  # (1, 1, 1, R)
        past = key_padding.shape[1] - 1
        held = past - (past - slots) % layer.ring  # (R,) the position index each slot holds
        seen = key_padding.bool()[:, held.clamp(min=0)] & (held >= 0)  # (B, R)
        seen = seen | ~seen.any(dim=-1, keepdim=True)
        return seen[:, None, None]  # (B, 1, 1, R)

    def forward(
        self,
        x: torch.Tensor,
        *,
        positions: torch.Tensor,
        key_padding: torch.Tensor | None = None,
        memory: torch.Tensor | None = None,
        memory_padding: torch.Tensor | None = None,
        cache: Cache | None = None,
        document_ids: torch.Tensor | None = None,
        token_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`document_ids` (B, T): packed documents (`zoo.nn.documents`), each token attends
        within its own document only; a forward of the whole window, no cache. `token_ids`
        (B, T): the tokens of x, which value embeddings (model.value_embeds) look up."""
        B, T, _ = x.shape
        # no padding: no mask, so SDPA can take its fused causal / unmasked path (where reading the
        # mask is free; elsewhere the data path leaves out a mask without padding)
        if key_padding is not None and host_reads_are_free(key_padding) and bool(key_padding.all()):
            key_padding = None
        if memory_padding is not None and host_reads_are_free(memory_padding) and bool(memory_padding.all()):
            memory_padding = None
        past = 0 if cache is None or cache.static else cache.length  # a static cache's is on the device
        mask: torch.Tensor | DocumentMask | None
        if document_ids is not None:
            if cache is not None or not self.causal:
                raise ValueError(
                    "document_ids mask a causal stack's forward over whole packed windows, without a KV cache"
                )
            kernel = self.document_kernel or "sdpa"
            mask, causal = DocumentMask(document_ids, kernel=kernel, key_padding=key_padding), False
        elif cache is not None and cache.static:
            # a static cache returns all `capacity` slots: the ones not yet written are masked
            mask, causal = self._static_cache_mask(cache, T, key_padding, x.device), False
        elif key_padding is None and past == 0:
            mask, causal = None, self.causal  # lets attention take the fused is_causal path
        elif key_padding is None and T == 1:
            mask, causal = None, False  # one new query after the cache sees every key
        else:
            mask = attention_mask(
                q_len=T,
                k_len=past + T,
                causal=self.causal,
                key_padding=key_padding,
                device=x.device,
            )  # (B or 1, 1, T, S)
            causal = False
        sliding: tuple[torch.Tensor | BlockMask | None, bool] | None  # the sliding layers' (mask, causal)
        if self.window is None:
            sliding = None
        elif isinstance(mask, DocumentMask):  # document_ids given
            # packed documents under a sliding window: a key must be both in the query's document
            # and in its band (the boolean forms and-ed; SDPA takes them)
            band = attention_mask(
                q_len=T, k_len=T, causal=True, key_padding=None, device=x.device, window=self.window
            )  # (1, 1, T, T) or None where the band holds all
            sliding = (mask.dense() if band is None else mask.dense() & band), False  # (B, 1, T, T)
        else:
            sliding = self._sliding_mask(cache, T, key_padding, x.device)
        memory_mask = None
        if memory is not None and memory_padding is not None:
            memory_mask = attention_mask(
                q_len=T,
                k_len=memory.shape[1],
                causal=False,
                key_padding=memory_padding,
                device=x.device,
            )  # (B, 1, T, S)
        x = self.dropout(self.embed_norm(self.position_for(0).embed(x, positions)))
        # activation checkpointing (Chen et al. 2016): keep each layer's input only and recompute
        # the layer in backward (dropout masks are replayed from the saved RNG state)
        recompute = self.checkpoint_activations and self.training and torch.is_grad_enabled() and cache is None
        first = self.position_for(0)
        shared: PositionScheme | SharedBias = first
        if (
            len(self.positions) == 1
            and first.bias_from_positions_only
            and not recompute
            and not torch.compiler.is_compiling()
        ):
            # the layers share one bias tensor in this forward (not under checkpointing: a
            # layer's recomputation must redo what its first run did)
            shared = SharedBias(first)
        values = self.values.hooks(token_ids) if self.values is not None else None
        x = expand(x, self.streams)  # (B, T, n, D) with hyper-connections
        for i, layer in enumerate(self.layers):
            run = partial(checkpoint, layer, use_reentrant=False) if recompute else layer
            x = run(
                x,
                positions=positions,
                position=shared if len(self.positions) == 1 else self.position_for(i),
                mask=mask if sliding is None or self.windows[i] is None else sliding[0],
                causal=causal if sliding is None or self.windows[i] is None else sliding[1],
                memory=memory,
                memory_mask=memory_mask,
                cache=cache.layers[i] if cache is not None else None,
                values=values[i] if values is not None else None,
                key_padding=key_padding if self.recurrent[i] else None,  # a recurrent layer's own masking
                document_ids=document_ids if self.recurrent[i] else None,
            )
        return self.final_norm(reduce(x, self.streams))
