"""A tokenizer as plain data (the files its `save` writes, as bytes), so a checkpoint carries
its tokenizer and loading it runs no code."""

from __future__ import annotations

import tempfile
from pathlib import Path

from zoo.data.errors import DataError
from zoo.data.tokenizers.registry import load_tokenizer


class TokenizerStateError(DataError):
    """A tokenizer entry that is not the files of a tokenizer zoo can load."""


def tokenizer_state(tokenizer) -> dict:
    """A tokenizer as plain data: the files its `save` writes, as bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save(tmp)
        return {str(p.relative_to(tmp)): p.read_bytes() for p in sorted(Path(tmp).rglob("*")) if p.is_file()}


def tokenizer_from_state(state: dict):
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in state.items():
            target = (Path(tmp) / name).resolve()
            if not isinstance(data, bytes) or not target.is_relative_to(Path(tmp).resolve()):
                raise TokenizerStateError(f"its tokenizer entry {name!r} is not a file of the tokenizer")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        try:
            return load_tokenizer(tmp)
        except DataError as exc:
            raise TokenizerStateError(
                f"its tokenizer cannot be used: {str(exc).replace(tmp, 'the checkpoint')}"
            ) from None
