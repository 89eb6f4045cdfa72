"""The model/tokenizer vocabulary check, run before training starts."""

from __future__ import annotations

from zoo.config.errors import ConfigError
from zoo.data.tokenizers.base import Tokenizer


def check_vocab(model_vocab_size: int, tokenizer: Tokenizer, init_from: str | None = None) -> None:
    """Raise ConfigError when the model's embedding table cannot hold every token id.
    A larger model vocabulary is allowed (unused rows, e.g. rounded up for speed). Under
    `init_from` the directory fixes model.vocab_size: the refusal names what can change."""
    if model_vocab_size >= tokenizer.vocab_size:
        return
    fix = (
        f"init_from={init_from} fixes model.vocab_size: give tokenizer.path a tokenizer of "
        f"{model_vocab_size} tokens at most (the directory's own is the default), another "
        f"directory, or drop init_from"
        if init_from is not None
        else f"set model.vocab_size={tokenizer.vocab_size} or more"
    )
    raise ConfigError(
        f"model.vocab_size ({model_vocab_size}) is smaller than the {tokenizer.kind} "
        f"tokenizer's vocabulary ({tokenizer.vocab_size}); {fix}"
    )
