"""Prompts as token batches and continuations as text, for the inference tools and the
training run's sample."""

from __future__ import annotations

import torch

from zoo.config.errors import ConfigError


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


def continue_text(tokenizer, prompt: str, new_ids) -> str:
    """`prompt` followed by the text of `new_ids` as it reads after the prompt: the prompt's ids
    and the new ones are decoded together, so a space a subword piece carries at its start is
    kept (decoding the new ids alone drops it: "said" + "unto" -> "saidunto")."""
    prompt_ids = tokenizer.encode(prompt)
    new_ids = [int(i) for i in new_ids]
    head = tokenizer.decode(prompt_ids)
    whole = tokenizer.decode(prompt_ids + new_ids)
    if whole.startswith(head):
        return prompt + whole[len(head) :]
    return prompt + tokenizer.decode(new_ids)
