"""Greedy decoding over the KV cache, for decoder-only (prompt continuation, left-padded
batches) and encoder-decoder (source -> target) models."""

from __future__ import annotations

from typing import Optional

import torch

from zoo.config.model import Family
from zoo.models.base import ZooModel


@torch.no_grad()
def generate(
    model: ZooModel,
    input_ids: torch.Tensor,
    *,
    attention_mask: Optional[torch.Tensor] = None,
    max_new_tokens: int = 32,
    bos_id: Optional[int] = None,
    eos_id: Optional[int] = None,
    pad_id: int = 0,
    use_cache: bool = True,
    vocab_limit: Optional[int] = None,
) -> torch.Tensor:
    """Greedy decoding.

    Decoder-only: input_ids (B, T) prompts, left-padded with attention_mask (B, T); returns the
    new tokens (B, N). Encoder-decoder: input_ids (B, S) sources; the target starts with bos_id;
    returns the target tokens after BOS (B, N). Rows that emitted eos_id are padded with pad_id
    afterwards; decoding stops when every row has. `vocab_limit` keeps ids below the
    tokenizer's size when the model's vocabulary is larger.
    """
    family = model.config.family
    if family == Family.encoder_only:
        raise ValueError("an encoder-only model cannot generate; use a decoder-only or encoder-decoder model")
    B = input_ids.shape[0]
    device = input_ids.device
    done = torch.zeros(B, dtype=torch.bool, device=device)
    new_tokens = []
    if family == Family.encoder_decoder:
        if bos_id is None:
            raise ValueError("encoder-decoder generation needs bos_id (the first decoder input)")
        memory = model.encode(input_ids, attention_mask)
        tokens = torch.full((B, 1), bos_id, dtype=torch.long, device=device)

        def step(inputs, cache, mask):
            return model(decoder_input_ids=inputs, encoder_hidden_states=memory,
                         attention_mask=attention_mask, cache=cache, use_cache=use_cache)
        mask = None
    else:
        tokens = input_ids
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)

        def step(inputs, cache, mask):
            return model(inputs, attention_mask=mask, cache=cache, use_cache=use_cache)

    cache = None
    context = tokens
    for _ in range(max_new_tokens):
        out = step(context if (cache is None or not use_cache) else context[:, -1:], cache, mask)
        cache = out.cache if use_cache else None
        logits = out.logits[:, -1]  # (B, V)
        if vocab_limit is not None:
            logits = logits[:, :vocab_limit]
        nxt = logits.argmax(-1)  # (B,)
        nxt = torch.where(done, torch.full_like(nxt, pad_id), nxt)
        new_tokens.append(nxt)
        if eos_id is not None:
            done = done | (nxt == eos_id)
        context = torch.cat([context, nxt[:, None]], dim=1)  # (B, T + 1)
        if mask is not None:
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        if eos_id is not None and bool(done.all()):
            break
    return torch.stack(new_tokens, dim=1) if new_tokens else input_ids.new_zeros(B, 0)
