"""The cached-decoding check the converters' parity tests share: zoo's cached greedy tokens
equal its uncached ones and transformers' `generate`'s on the same prompt (its own cache: keys
and values, and for recurrent layers their convolution and recurrent state)."""

from __future__ import annotations

import torch

from zoo.models.generate import generate


def assert_greedy_decoding_matches(model, hf, ids: torch.Tensor, new_tokens: int = 8) -> None:
    """`model` (zoo) and `hf` (transformers) decode `ids` (B, T) greedily to the same tokens."""
    ours = generate(model, ids, max_new_tokens=new_tokens, bos_id=None, eos_id=None)
    uncached = generate(model, ids, max_new_tokens=new_tokens, bos_id=None, eos_id=None, use_cache=False)
    with torch.no_grad():
        theirs = hf.generate(ids, max_new_tokens=new_tokens, do_sample=False, attention_mask=torch.ones_like(ids))
    assert torch.equal(ours, uncached)
    assert torch.equal(ours, theirs[:, ids.shape[1] :])
