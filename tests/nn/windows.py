"""Sliding-window checks shared by tests/nn/test_sliding_window.py and the rows of
tests/models/test_variants.py's design: a full model and the same weights sliding, and what a
row with local and global layers must do."""

from __future__ import annotations

import torch

import zoo
from tests.conftest import tiny


def pair(family, position, window, **overrides):
    """A full model and the same weights with every layer sliding at `window`."""
    full = zoo.build_model(tiny(family, position, **overrides)).eval()
    sliding = zoo.build_model(tiny(family, position, attention="sliding", window=window, **overrides)).eval()
    sliding.load_state_dict(full.state_dict())
    return full, sliding


def window_logits(model, family, ids):
    if family == "encoder_decoder":
        return model(input_ids=ids, decoder_input_ids=ids).logits
    return model(ids).logits


def assert_trains_with_local_and_global_layers(family, position, **kinds):
    """Local (window 3) and global layers alternating, dropout on, a padded batch: every parameter
    gets a finite gradient. A row of tests/models/test_variants.py runs this with its kinds."""
    model = zoo.build_model(
        tiny(family, position, n_layers=3, attention="sliding", window=3, global_every=2, dropout=0.1, **kinds)
    ).train()
    ids = torch.randint(4, 37, (2, 9))
    padding = torch.ones(2, 9, dtype=torch.long)
    padding[1, :3] = 0
    if family == "encoder_decoder":
        out = model(input_ids=ids, attention_mask=padding, decoder_input_ids=ids)
    else:
        out = model(ids, attention_mask=padding)
    out.logits.float().logsumexp(-1).mean().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def assert_a_covering_window_is_full_attention(family, position, **kinds):
    """A window of 2T + 1 over T tokens is full attention (same parameters, same logits), and a
    narrow one is not. A row of tests/models/test_variants.py runs this with its kinds."""
    full, sliding = pair(family, position, window=2 * 10 + 1, **kinds)
    ids = torch.randint(4, 37, (2, 10))
    assert sum(p.numel() for p in sliding.parameters()) == sum(p.numel() for p in full.parameters())
    with torch.no_grad():
        torch.testing.assert_close(
            window_logits(sliding, family, ids), window_logits(full, family, ids), atol=1e-5, rtol=1e-5
        )
    narrow = pair(family, position, window=3, **kinds)[1]
    narrow.load_state_dict(full.state_dict())
    with torch.no_grad():  # the check can fail: a narrow window changes the logits
        assert not torch.allclose(window_logits(narrow, family, ids), window_logits(full, family, ids), atol=1e-4)
