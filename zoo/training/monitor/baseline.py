"""A context-free reference point for language-model losses."""

from __future__ import annotations

import torch


def unigram_cross_entropy(train_tokens: torch.Tensor, val_tokens: torch.Tensor, vocab_size: int) -> dict:
    """The loss (nats/token) of the best model that ignores context: unigram frequencies of the
    training tokens (add-one smoothed over the vocabulary), scored on the validation tokens.
    Also returns the entropy of the training unigram distribution itself."""
    train = torch.bincount(train_tokens.long().flatten(), minlength=vocab_size)
    val = torch.bincount(val_tokens.long().flatten(), minlength=vocab_size)
    return unigram_from_counts(train, val)


def unigram_from_counts(train_counts, val_counts) -> dict:
    """`unigram_cross_entropy` from how often each id occurs in each split ([V] each)."""
    counts = torch.as_tensor(train_counts).double() + 1.0
    val = torch.as_tensor(val_counts).double()
    p = counts / counts.sum()
    entropy = float(-(p * p.log()).sum())
    cross_entropy = float(-(val * p.log()).sum() / val.sum())
    return {"unigram_entropy": entropy, "unigram_val_loss": cross_entropy}
