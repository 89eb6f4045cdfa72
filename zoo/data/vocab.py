"""The model/tokenizer vocabulary check, run before training starts."""

from __future__ import annotations

from zoo.config.errors import ConfigError
from zoo.data.tokenizers.base import Tokenizer


def check_vocab(model_vocab_size: int, tokenizer: Tokenizer) -> None:
    """Raise ConfigError when the model's embedding table cannot hold every token id.
    A larger model vocabulary is allowed (unused rows, e.g. rounded up for speed)."""
    if model_vocab_size < tokenizer.vocab_size:
        raise ConfigError(
            f"model.vocab_size ({model_vocab_size}) is smaller than the {tokenizer.kind} "
            f"tokenizer's vocabulary ({tokenizer.vocab_size}); set "
            f"model.vocab_size={tokenizer.vocab_size} or more"
        )
