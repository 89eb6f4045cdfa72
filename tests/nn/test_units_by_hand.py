"""The small units of zoo.nn against formulas written out here: the feed-forward sub-layer for
every activation, the token and position embeddings, the attention module's recorded weights,
the cache's bookkeeping and the per-forward sharing of a position bias."""

from __future__ import annotations

import math

import pytest
import torch

import zoo
from tests.conftest import tiny
from zoo.config.facts.positions import PositionKind
from zoo.config.schema.model import GATED, Activation
from zoo.nn.attention import Attention
from zoo.nn.cache import KVCache
from zoo.nn.embedding import TokenEmbedding
from zoo.nn.feedforward import FeedForward
from zoo.nn.position.alibi import ALiBiPositions
from zoo.nn.position.base import SharedBias
from zoo.nn.position.learned import LearnedPositions
from zoo.nn.position.sinusoidal import SinusoidalPositions, sinusoidal_table

# the activations written from their definitions, not through torch.nn.functional
_ERF_GELU = lambda x: 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))  # noqa: E731
_TANH_GELU = lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))  # noqa: E731
BY_HAND = {
    Activation.relu: lambda x: x.clamp(min=0.0),
    Activation.gelu: _ERF_GELU,
    Activation.gelu_tanh: _TANH_GELU,
    Activation.swiglu: lambda x: x / (1.0 + torch.exp(-x)),  # SiLU / Swish-1
    Activation.geglu: _ERF_GELU,
    Activation.geglu_tanh: _TANH_GELU,
    Activation.relu2: lambda x: x.clamp(min=0.0) ** 2,  # ReLU², So et al. 2021 (Primer)
}


@pytest.mark.parametrize("activation", list(Activation))
def test_feed_forward_by_hand(activation):
    """Plain: W_out act(W_in x + b_in) + b_out. Gated (Shazeer 2020): the first d_ff rows of
    W_in are the gate, the rest the up projection; W_out (act(gate) * up) + b_out."""
    torch.manual_seed(0)
    D, F = 6, 5
    ff = FeedForward(D, F, activation, bias=True, dropout=0.0)
    x = torch.randn(2, 3, D, dtype=torch.float64)
    ff = ff.double()
    h = x @ ff.w_in.weight.T + ff.w_in.bias  # (B, T, F or 2F)
    if activation in GATED:
        assert h.shape[-1] == 2 * F
        h = BY_HAND[activation](h[..., :F]) * h[..., F:]  # (B, T, F)
    else:
        assert h.shape[-1] == F
        h = BY_HAND[activation](h)
    expected = h @ ff.w_out.weight.T + ff.w_out.bias  # (B, T, D)
    torch.testing.assert_close(ff(x), expected, atol=1e-10, rtol=1e-10)
    assert f"activation={activation.value}" in repr(ff)  # print(model) names it


def test_token_embedding_looks_up_rows_and_scales_only_when_asked():
    torch.manual_seed(0)
    ids = torch.tensor([[0, 3, 6]])
    plain = TokenEmbedding(7, 4)
    assert torch.equal(plain(ids), plain.weight[ids])
    scaled = TokenEmbedding(7, 4, scale=True)
    torch.testing.assert_close(scaled(ids), scaled.weight[ids] * 2.0)  # sqrt(D) = 2


@pytest.mark.parametrize("ids, bad", [([-1, 2], -1), ([2, -3, 1], -3), ([2, 7], 7), ([9, 0], 9), ([-2, 8], -2)])
def test_token_ids_outside_the_vocabulary_are_refused_naming_one(ids, bad):
    with pytest.raises(ValueError, match=rf"^token id {bad} is outside the vocabulary \[0, 7\)"):
        TokenEmbedding(7, 4)(torch.tensor([ids]))


def test_learned_positions_read_row_p_plus_the_offset():
    torch.manual_seed(0)
    x = torch.zeros(1, 3, 4)
    positions = torch.tensor([[0, 1, 7]])
    plain = LearnedPositions(d_model=4, max_seq_len=8)
    assert plain.table.weight.shape == (8, 4)
    assert torch.equal(plain.embed(x, positions), plain.table.weight[positions])
    shifted = LearnedPositions(d_model=4, max_seq_len=8, offset=2)  # BART keeps 2 rows before position 0
    assert shifted.table.weight.shape == (10, 4)
    assert torch.equal(shifted.embed(x + 1.0, positions), 1.0 + shifted.table.weight[positions + 2])
    with pytest.raises(ValueError, match="position 8 is past the learned position table"):
        shifted.embed(x[:, :1], torch.tensor([[8]]))


def test_sinusoidal_positions_add_the_table():
    x = torch.randn(2, 5, 8)
    positions = torch.tensor([[0, 1, 2, 3, 4], [3, 4, 5, 6, 7]])
    got = SinusoidalPositions(d_model=8).embed(x, positions)
    torch.testing.assert_close(got, x + sinusoidal_table(positions, 8))


def test_attention_records_its_weights_only_when_asked():
    torch.manual_seed(0)
    attn = Attention(d_model=8, n_heads=2, n_kv_heads=2, head_dim=4, bias=False, dropout=0.0)
    assert attn.last_weights is None
    x = torch.randn(1, 3, 8)
    positions = torch.arange(3)[None]
    scheme = LearnedPositions(d_model=8, max_seq_len=8)  # adds nothing inside attention
    attn(x, positions=positions, position=scheme, mask=None, causal=True)
    assert attn.last_weights is None
    attn.keep_weights = True
    attn(x, positions=positions, position=scheme, mask=None, causal=True)
    w = attn.last_weights  # (B, H, T, S)
    assert w.shape == (1, 2, 3, 3)
    torch.testing.assert_close(w.sum(-1), torch.ones(1, 2, 3))
    assert torch.equal(w.triu(1), torch.zeros_like(w))  # causal: nothing above the diagonal


def test_a_fresh_cache_is_empty():
    cache = KVCache()
    assert cache.k is None and cache.v is None and cache.positions is None and cache.length == 0


@pytest.mark.parametrize("first_shared", [True, False])
def test_shared_and_per_row_positions_meet_as_per_row(first_shared):
    """A prompt's positions may be one shared (1, T) row and a later step's per-row (B, 1), or
    the other way round: the cache then keeps (B, S), each row its own."""
    B, Hkv, Dh = 3, 1, 2
    cache = KVCache()
    shared, per_row = torch.tensor([[0, 1]]), torch.tensor([[5, 6], [7, 8], [9, 10]])
    first, second = (shared, per_row) if first_shared else (per_row, shared)
    cache.update(torch.zeros(B, Hkv, 2, Dh), torch.zeros(B, Hkv, 2, Dh), first)
    _, _, positions = cache.update(torch.ones(B, Hkv, 2, Dh), torch.ones(B, Hkv, 2, Dh), second)
    expected = torch.cat([first.expand(B, -1), second.expand(B, -1)], dim=1)  # (B, 4)
    assert torch.equal(positions, expected)


def test_a_shared_bias_is_reused_only_for_the_same_query_and_key_positions():
    scheme = ALiBiPositions(n_heads=2)
    shared = SharedBias(scheme)
    q = k = torch.zeros(1, 2, 3, 4)
    a, b = torch.tensor([[0, 1, 2]]), torch.tensor([[4, 6, 9]])
    shared.attend(q, k, a, b)
    for q_pos, k_pos in [(b, b), (a, a), (a, b)]:
        _, _, bias = shared.attend(q, k, q_pos, k_pos)
        assert torch.equal(bias, scheme.attend(q, k, q_pos, k_pos)[2])
    shared.attend(q, k, a, b)
    _, _, bias = shared.attend(q.double(), k.double(), a, b)  # another dtype: computed again
    assert bias.dtype == torch.float64


# T5's buckets and ALiBi depend on the positions alone (Raffel et al. 2020 share T5's bias across
# layers): one computation per forward. Every other scheme transforms q and k, or adds terms that
# depend on them, in each layer.
BIAS_FROM_POSITIONS_ONLY = {PositionKind.relative, PositionKind.alibi}


@pytest.mark.parametrize("kind", list(PositionKind))
def test_a_position_bias_is_computed_once_per_forward_only_where_positions_alone_make_it(kind, monkeypatch):
    n_layers = 3
    model = zoo.build_model(tiny("decoder_only", kind.value, n_layers=n_layers)).eval()
    stack = model.decoder
    calls = []
    for cls in {type(p) for p in stack.positions}:
        original = cls.attend
        monkeypatch.setattr(cls, "attend", lambda self, *a, _o=original, **kw: calls.append(1) or _o(self, *a, **kw))
    with torch.no_grad():
        model(torch.randint(0, 37, (2, 5)))
    assert len(calls) == (1 if kind in BIAS_FROM_POSITIONS_ONLY else n_layers)


@pytest.mark.parametrize("kind", list(PositionKind))
def test_the_state_dict_holds_parameters_only(kind):
    """Tables a scheme computes from the config (ALiBi's slopes, RoPE's frequencies) are
    non-persistent buffers: a checkpoint or an exported file holds weights alone."""
    model = zoo.build_model(tiny("decoder_only", kind.value))
    assert set(model.state_dict()) == {name for name, _ in model.named_parameters(remove_duplicate=False)}


def test_rmsnorm_by_default_is_llamas():
    """zoo.nn.RMSNorm(dim) without an eps computes what transformers' LlamaRMSNorm(dim) does."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    from zoo.nn.norm import RMSNorm

    x = torch.randn(2, 3, 8) * 1e-3  # small activations: eps matters
    ours, theirs = RMSNorm(8), LlamaRMSNorm(8)
    assert ours.eps == theirs.variance_epsilon
    torch.testing.assert_close(ours(x), theirs(x))
