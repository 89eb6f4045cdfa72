"""The logit statistics of the instability monitor against sums written out here: the largest
attention logit a layer records is the largest q·kᵀ/sqrt(Dh) over the pairs its mask allows
(grouped-query heads, padding and causal masks, a query block smaller than the sequence), and
the output statistics are the mean logit and mean logsumexp of the model's own logits."""

from __future__ import annotations

import math

import pytest
import torch

from tests.conftest import tiny
from tests.nn.logit_by_hand import max_logit_by_hand
from zoo.models import build_model
from zoo.nn import logit_stats
from zoo.nn.attention import Attention
from zoo.nn.logit_stats import max_attention_logit, output_logit_stats


@pytest.mark.parametrize("block", [None, 3])
def test_max_attention_logit_is_the_largest_allowed_scaled_product(monkeypatch, block):
    if block is not None:  # blocks of queries smaller than the sequence (B·H·S = 2·4·7 scores a query)
        monkeypatch.setattr(logit_stats, "_BLOCK_ELEMENTS", 2 * 4 * 7 * block)
    q, k = torch.randn(2, 4, 7, 8) * 3, torch.randn(2, 2, 7, 8) * 3  # H = 4 queries, Hkv = 2
    k[:, :, 6] = 100.0  # the last key would win everywhere, but the causal mask hides it from all but one query
    padding = torch.ones(2, 1, 7, 7, dtype=torch.bool)
    padding[1, :, :, :2] = False  # row 1: its first two keys are padding
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    keep = padding[:, 0] & causal  # (B, T, S)
    got = max_attention_logit(q, k, mask=padding, causal=True)
    assert got.dtype == torch.float32 and not got.requires_grad
    assert float(got) == pytest.approx(max_logit_by_hand(q, k, keep), rel=1e-5)
    # without a mask every pair counts
    assert float(max_attention_logit(q, k)) == pytest.approx(
        max_logit_by_hand(q, k, torch.ones(2, 7, 7, dtype=torch.bool)), rel=1e-5
    )
    # a scale other than 1/sqrt(Dh) (muP's 1/Dh)
    assert float(max_attention_logit(q, k, scale=1 / 8, mask=padding, causal=True)) == pytest.approx(
        max_logit_by_hand(q, k, keep) * math.sqrt(8) / 8, rel=1e-5
    )


def test_cached_queries_are_the_last_keys():
    """Decoding: 2 queries against 5 keys, the queries being keys 3 and 4."""
    q, k = torch.randn(1, 2, 2, 4), torch.randn(1, 2, 5, 4)
    keep = torch.ones(5, dtype=torch.bool).repeat(2, 1).tril(3)[None]  # (1, 2, 5)
    assert float(max_attention_logit(q, k, causal=True)) == pytest.approx(max_logit_by_hand(q, k, keep), rel=1e-5)


def test_each_layer_of_a_tiny_model_records_its_own_maximum():
    """A decoder with learned positions (no transform of q and k): each layer's recorded maximum
    is the hand computation from its input x and the weights of its fused projection."""
    model = build_model(tiny(n_layers=2, n_heads=4, n_kv_heads=2, init_std=0.5)).eval()
    attentions = [m for m in model.modules() if isinstance(m, Attention)]
    inputs = {}
    for i, attention in enumerate(attentions):
        attention.record_max_logit = True
        attention.register_forward_pre_hook(lambda m, args, i=i: inputs.__setitem__(i, args[0].detach()))
    ids = torch.randint(0, 37, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[0, :3] = 0  # left padding in row 0
    with torch.no_grad():
        model(ids, attention_mask=mask)
    causal = torch.ones(9, 9, dtype=torch.bool).tril()
    keep = mask.bool()[:, None, :] & causal  # (B, T, S)
    for i, attention in enumerate(attentions):
        x = inputs[i]  # (B, T, D)
        w = attention.qkv_proj.weight  # (H·Dh + 2·Hkv·Dh, D)
        b = attention.qkv_proj.bias
        qkv = x @ w.T + (b if b is not None else 0)  # (B, T, 4·4 + 2·2·4)
        q = qkv[..., :16].reshape(2, 9, 4, 4).transpose(1, 2)  # (B, H, T, Dh)
        k = qkv[..., 16:24].reshape(2, 9, 2, 4).transpose(1, 2)  # (B, Hkv, T, Dh)
        assert float(attention.last_max_logit) == pytest.approx(max_logit_by_hand(q, k, keep), rel=1e-5), i
    assert attentions[0].last_max_logit != attentions[1].last_max_logit


def test_off_nothing_is_recorded():
    model = build_model(tiny())
    with torch.no_grad():
        model(torch.randint(0, 37, (1, 5)))
    assert all(not m.record_max_logit and m.last_max_logit is None for m in model.modules() if isinstance(m, Attention))


@pytest.mark.parametrize("chunk", [1024, 4])
def test_output_statistics_are_the_mean_logit_and_mean_log_z(chunk):
    model = build_model(tiny(init_std=0.5)).eval()
    with torch.no_grad():
        out = model(torch.randint(0, 37, (3, 7)))
    logits = out.logits.reshape(-1, 37).double()  # (B·T, V)
    hidden = out.hidden_states.reshape(-1, 16)  # (B·T, D)
    mean, log_z, n = output_logit_stats(model.logits, hidden, chunk=chunk)
    assert n == 21
    assert float(mean) == pytest.approx(float(logits.mean()), abs=1e-5)
    assert float(log_z) == pytest.approx(float(torch.logsumexp(logits, dim=-1).mean()), abs=1e-5)


def test_a_flex_block_mask_counts_the_pairs_it_allows():
    """A sliding band given as a FlexAttention BlockMask (a sliding layer's mask) counts the same
    pairs as its boolean form."""
    from torch.nn.attention.flex_attention import create_block_mask

    def band(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & (q_idx - kv_idx < 3)  # causal, a window of 3 keys

    q, k = torch.randn(1, 2, 8, 4), torch.randn(1, 2, 8, 4)
    q[:, :, 7], k[:, :, 0] = 10.0, 50.0  # the largest product: the last query and the first key, outside the band
    block_mask = create_block_mask(band, None, None, 8, 8, device="cpu")
    rows, cols = torch.arange(8)[:, None], torch.arange(8)[None, :]
    keep = ((cols <= rows) & (rows - cols < 3))[None]  # (1, T, S)
    assert float(max_attention_logit(q, k, mask=block_mask)) == pytest.approx(max_logit_by_hand(q, k, keep), rel=1e-5)
    assert float(max_attention_logit(q, k, mask=block_mask)) < float(max_attention_logit(q, k, causal=True))
