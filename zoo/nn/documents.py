"""Document masking of packed sequences (`data.document_mask=true`): a packed window holds the
ends and beginnings of several documents; with their ids (B, T) attention is block-diagonal
causal (a token sees only the earlier tokens of its own document) and positions restart at 0
at each document, so a packed batch computes what each document computes alone.

Two kernels compute the same thing: `scaled_dot_product_attention` with the boolean (B, 1, T, T)
mask of `zoo.nn.mask.document_mask`, the one a stack takes, and FlexAttention (Dong et al. 2024)
with a block mask built from the ids, which skips the blocks no query of a tile sees where it is
compiled on a GPU, taken only when a stack's `document_kernel` is set to "flex" until that path
is measured (eager FlexAttention materialises every score; on the CPU it has no backward). `DocumentMask` carries both forms through a stack
forward, each built once when first asked for, and attention takes the one it can use
(`takes_flex`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from zoo.nn.mask import document_mask

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask


def positions_in_documents(document_ids: torch.Tensor) -> torch.Tensor:
    """(B, T) document ids, constant over each document's run of tokens -> (B, T) positions
    counting from 0 at each document's first token."""
    B, T = document_ids.shape
    index = torch.arange(T, device=document_ids.device).expand(B, T)  # (B, T)
    starts = torch.ones_like(document_ids, dtype=torch.bool)
    starts[:, 1:] = document_ids[:, 1:] != document_ids[:, :-1]  # (B, T): a document begins
    first = torch.where(starts, index, torch.zeros_like(index)).cummax(dim=-1).values  # (B, T)
    return index - first


def document_mask_mod(document_ids: torch.Tensor) -> Callable:
    """The FlexAttention mask_mod of `zoo.nn.mask.document_mask`: (b, h, q, kv) -> may attend.
    Composes with other mask_mods by `torch.nn.attention.flex_attention.and_masks`."""

    def same_document_causal(b, h, q, kv):
        return (kv <= q) & (document_ids[b, q] == document_ids[b, kv])

    return same_document_causal


class DocumentMask:
    """The document mask of one stack forward: `dense` (B, 1, T, T) boolean, `block` a
    FlexAttention BlockMask, each made when first asked for. `key_padding` (B, T), 1 = token,
    is and-ed into the dense form (a padded batch takes SDPA). `kernel`: "flex" or "sdpa"."""

    def __init__(self, document_ids: torch.Tensor, *, kernel: str, key_padding: torch.Tensor | None = None) -> None:
        if kernel not in ("flex", "sdpa"):
            raise ValueError(f"document mask kernel must be flex or sdpa, got {kernel!r}")
        self.document_ids = document_ids
        self.kernel = kernel if key_padding is None else "sdpa"
        self.key_padding = key_padding
        self._dense: torch.Tensor | None = None
        self._block: BlockMask | None = None

    def dense(self) -> torch.Tensor:
        if self._dense is None:
            mask = document_mask(self.document_ids)  # (B, 1, T, T)
            if self.key_padding is not None:
                mask = mask & self.key_padding.bool()[:, None, None, :]  # (B, 1, T, T)
                mask = mask | ~mask.any(dim=-1, keepdim=True)  # a pad query sees every key; unused
            self._dense = mask
        return self._dense

    def block(self):
        if self._block is None:
            from torch.nn.attention.flex_attention import create_block_mask

            B, T = self.document_ids.shape
            self._block = create_block_mask(
                document_mask_mod(self.document_ids), B, None, T, T, device=self.document_ids.device
            )
        return self._block


FLEX_MIN_HEAD_DIM = 16  # inductor's FlexAttention lowering refuses smaller heads (seen on an H200, torch 2.11)


def takes_flex(
    mask: DocumentMask, *, bias: torch.Tensor | None, math_path: bool, dropout: float, head_dim: int
) -> bool:
    """Does attention under `mask` take FlexAttention? Its kernel is flex, the heads are at
    least FLEX_MIN_HEAD_DIM wide (compiled FlexAttention refuses narrower ones: "embedding
    dimension of the query, key, and value must be at least 16"), and nothing asks for what only
    the explicit path gives: the weights (Shaw), attention dropout, or an additive score bias (T5
    bias, ALiBi: a dense (B, H, T, T) bias costs the memory the block mask saves, and inductor's
    CPU lowering of such a score_mod fails in torch 2.13). Those take SDPA."""
    return mask.kernel == "flex" and head_dim >= FLEX_MIN_HEAD_DIM and bias is None and not math_path and dropout == 0.0


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: DocumentMask, *, scale: float) -> torch.Tensor:
    """FlexAttention of q (B, H, T, Dh), k, v (B, Hkv, T, Dh) under `mask`'s block mask ->
    (B, H, T, Dh)."""
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention(
        q, k, v, block_mask=mask.block(), scale=scale, enable_gqa=k.shape[1] != q.shape[1]
    )  # (B, H, T, Dh)
