"""Shared pieces of the inference tools: turning prompts into a padded batch, and refusing
lengths the model cannot handle."""

from __future__ import annotations

import torch

from zoo.config.errors import ConfigError
from zoo.config.model import Family, ModelConfig, PositionKind


def encode_prompts(tokenizer, texts: list[str], *, left_pad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """-> input_ids (B, T) and attention_mask (B, T), padded on the left (decoder-only
    prompts) or the right (encoder sources). Characters the tokenizer does not know are
    refused with the characters named."""
    specials = tokenizer.special_ids()
    rows = []
    for text in texts:
        ids = tokenizer.encode(text)
        if specials["unk"] in ids:
            unknown = sorted({c for c in text if specials["unk"] in tokenizer.encode(c)})
            shown = "".join(unknown) or text
            raise ConfigError(f"the prompt has characters the tokenizer does not know: {shown!r}")
        if not ids:
            raise ConfigError(f"the prompt {text!r} encodes to no tokens")
        rows.append(ids)
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), specials["pad"], dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, row in enumerate(rows):
        span = slice(width - len(row), width) if left_pad else slice(0, len(row))
        ids[i, span] = torch.tensor(row)
        mask[i, span] = 1
    return ids, mask


def check_lengths(cfg: ModelConfig, input_len: int, max_new_tokens: int) -> None:
    """Learned positions end at max_seq_len: refuse what would run past them."""
    if cfg.position.kind != PositionKind.learned:
        return
    if cfg.family == Family.decoder_only:
        if input_len + max_new_tokens > cfg.max_seq_len:
            raise ConfigError(
                f"prompt ({input_len} tokens) + max_new_tokens ({max_new_tokens}) = "
                f"{input_len + max_new_tokens} is past the learned positions (model.max_seq_len="
                f"{cfg.max_seq_len})"
            )
    else:
        if input_len > cfg.max_seq_len:
            raise ConfigError(
                f"the source ({input_len} tokens) is longer than the learned positions "
                f"(model.max_seq_len={cfg.max_seq_len})"
            )
        if max_new_tokens + 1 > cfg.max_seq_len:
            raise ConfigError(
                f"max_new_tokens ({max_new_tokens}) + BOS is past the learned positions "
                f"(model.max_seq_len={cfg.max_seq_len})"
            )
