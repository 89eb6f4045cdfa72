"""A context-free reference point for language-model losses."""

from __future__ import annotations

import torch


def unigram_cross_entropy(train_tokens: torch.Tensor, val_tokens: torch.Tensor, vocab_size: int) -> dict:
    """The loss (nats/token) of the best model that ignores context: unigram frequencies of the
    training tokens (add-one smoothed over the vocabulary), scored on the validation tokens.
    Also returns the entropy of the training unigram distribution itself."""
    counts = torch.bincount(train_tokens.long().flatten(), minlength=vocab_size).double() + 1.0
    p = counts / counts.sum()
    entropy = float(-(p * p.log()).sum())
    cross_entropy = float(-p.log()[val_tokens.long().flatten()].mean())
    return {"unigram_entropy": entropy, "unigram_val_loss": cross_entropy}
