"""Numeric checks against hand-worked values (Vaswani et al. 2017 and explanatory texts)."""

from __future__ import annotations

import math

import pytest
import torch

from tests.conftest import tiny
from zoo.config.schema.convert import as_model_config
from zoo.config.schema.model import NormPlacement, NormType
from zoo.nn.attention import Attention, attention
from zoo.nn.block import SubLayer
from zoo.nn.norm import RMSNorm, build_norm
from zoo.nn.position.sinusoidal import sinusoidal_table


def test_sinusoidal_table_matches_the_paper():
    table = sinusoidal_table(torch.arange(2), 4)
    assert torch.allclose(table[0], torch.tensor([0.0, 1.0, 0.0, 1.0]))
    expected = torch.tensor([math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)])
    assert torch.allclose(table[1], expected, atol=1e-6)
    # the common mistake (dimension index used as 2i) gives cos(1e-4)... in slot 3; catch it
    assert not torch.allclose(table[1], torch.tensor([0.841471, 0.99995, 0.0001, 1.0]), atol=1e-4)


def test_sinusoidal_general_formula():
    D = 16
    table = sinusoidal_table(torch.arange(50), D)
    pos = torch.arange(50.0)[:, None]
    i = torch.arange(D // 2)[None]
    angle = pos / 10000 ** (2 * i / D)
    assert torch.allclose(table[:, 0::2], angle.sin(), atol=1e-5)
    assert torch.allclose(table[:, 1::2], angle.cos(), atol=1e-5)


@pytest.mark.parametrize("math_path", [False, True])
def test_scaled_dot_product_attention_by_hand(math_path):
    q = k = torch.tensor([[1.0, 0.0], [0.0, 1.0]])[None, None]  # (1, 1, 2, 2)
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0]])[None, None]
    out, weights = attention(q, k, v, math_path=math_path)
    expected = torch.tensor([[1.66048, 2.66048], [2.33952, 3.33952]])
    assert torch.allclose(out[0, 0], expected, atol=1e-5)
    if math_path:
        assert torch.allclose(weights[0, 0], torch.tensor([[0.66976, 0.33024], [0.33024, 0.66976]]), atol=1e-5)


def test_equal_scores_average_values_and_causal_weights_are_zero_above_diagonal():
    q = torch.zeros(1, 1, 3, 2)
    k = torch.zeros(1, 1, 3, 2)
    v = torch.randn(1, 1, 3, 2)
    out, _ = attention(q, k, v)
    assert torch.allclose(out[0, 0], v[0, 0].mean(0).expand(3, 2), atol=1e-6)
    out, weights = attention(
        torch.randn(1, 2, 4, 3), torch.randn(1, 2, 4, 3), torch.randn(1, 2, 4, 3), causal=True, math_path=True
    )
    assert torch.allclose(weights.sum(-1), torch.ones(1, 2, 4))
    assert (weights.triu(1) == 0).all()


def test_two_head_post_ln_encoder_sublayer_by_hand():
    """d_model 4, two heads of width 3 (so H·Dh = 6 != D), no biases, scores scaled by 1/30."""
    E = torch.tensor([[1, 3, 3, 5], [2.84, 3.99, 4, 6]])
    WQ = [[[0, 0, 0], [1, 1, 0], [0, 0, 1], [1, 0, 0]], [[1, 0, 1], [0, 1, 0], [1, 0, 0], [0, 1, 1]]]
    WK = [[[1, 0, 1], [0, 1, 0], [1, 0, 1], [0, 1, 0]], [[0, 1, 1], [1, 0, 1], [1, 1, 0], [0, 1, 0]]]
    WV = [[[0, 1, 1], [1, 0, 0], [1, 0, 1], [0, 1, 0]], [[1, 0, 0], [0, 1, 1], [0, 0, 1], [1, 0, 0]]]
    W_O = torch.tensor(
        [
            [0.79445237, 0.1081456, 0.27411536, 0.78394531],
            [0.29081936, -0.36187258, -0.32312791, -0.48530339],
            [-0.36702934, -0.76471963, -0.88058366, -1.73713022],
            [-0.02305587, -0.64315981, -0.68306653, -1.25393866],
            [0.29077448, -0.04121674, 0.01509932, 0.13149906],
            [0.57451867, -0.08895355, 0.02190485, 0.24535932],
        ]
    )

    def cat(ws):
        return torch.cat([torch.tensor(w, dtype=torch.float32) for w in ws], dim=1)  # (4, 6)

    attn = Attention(d_model=4, n_heads=2, n_kv_heads=2, head_dim=3, bias=False, dropout=0.0)
    with torch.no_grad():
        # nn.Linear computes x·Wᵀ, so the stored weight is the transpose of the text's matrices
        attn.qkv_proj.weight.copy_(torch.cat([cat(WQ), cat(WK), cat(WV)], dim=1).T)
        attn.o_proj.weight.copy_(W_O.T)
    attn.scale = 1 / 30
    attn.keep_weights = True
    from zoo.nn.position.none import NoPositions

    cfg = as_model_config(tiny(d_model=4, n_heads=2, head_dim=3, norm="post", bias=False))
    sub = SubLayer(cfg)

    def z_fn(h):
        return attn(h, positions=torch.arange(2)[None], position=NoPositions(), mask=None)

    Z = z_fn(E[None])[0]
    assert torch.allclose(
        Z,
        torch.tensor(
            [
                [11.46394285, -13.18016471, -11.59340253, -17.04387829],
                [11.62608573, -13.47454936, -11.87126395, -17.4926367],
            ]
        ),
        atol=1e-4,
    )
    out = sub(E[None], z_fn)[0]
    expected = torch.tensor(
        [[1.71887693, -0.56365339, -0.40370747, -0.75151608], [1.71909039, -0.56050453, -0.40695381, -0.75163205]]
    )
    assert torch.allclose(out, expected, atol=1e-5)


def test_layernorm_keeps_eps_inside_the_square_root():
    x = torch.tensor([[1.0, 2.0, 4.0, 8.0]])
    norm = build_norm(NormType.layernorm, 4, eps=0.5, bias=True)
    mu, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    inside = (x - mu) / torch.sqrt(var + 0.5)
    outside = (x - mu) / (var.sqrt() + 0.5)
    assert torch.allclose(norm(x), inside, atol=1e-6)
    assert not torch.allclose(norm(x), outside, atol=1e-3)


def test_rmsnorm_formula_and_scale_invariance():
    x = torch.randn(3, 8)
    norm = RMSNorm(8, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 2.0, 8))
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * norm.weight
    assert torch.allclose(norm(x), expected, atol=1e-6)
    assert torch.allclose(norm(5 * x), norm(x), atol=1e-5)
    assert build_norm(NormType.rmsnorm, 8, 1e-6, bias=True).__class__ is RMSNorm


def test_pre_and_post_placement():
    cfg_pre = as_model_config(tiny(norm="pre"))
    cfg_post = as_model_config(tiny(norm="post"))
    x = torch.randn(1, 3, 16)

    def f(h):
        return 2 * h

    pre, post = SubLayer(cfg_pre), SubLayer(cfg_post)
    assert cfg_pre.norm == NormPlacement.pre
    assert torch.allclose(pre(x, f), x + 2 * pre.norm(x), atol=1e-6)
    assert torch.allclose(post(x, f), post.norm(3 * x), atol=1e-6)


# -- the boolean attention mask, entry by entry --------------------------------------------------


def _mask(**kw):
    from zoo.nn.mask import attention_mask

    return attention_mask(device=torch.device("cpu"), **kw)


def test_causal_mask_is_lower_triangular_and_offset_for_cached_keys():
    full = _mask(q_len=4, k_len=4, causal=True, key_padding=None)
    assert full.shape == (1, 1, 4, 4)
    assert torch.equal(full[0, 0], torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]).bool())
    # 2 new queries after 3 cached keys (S = 5): query i sees keys 0 .. 3 + i
    step = _mask(q_len=2, k_len=5, causal=True, key_padding=None)
    assert torch.equal(step[0, 0], torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]).bool())
    one = _mask(q_len=1, k_len=5, causal=True, key_padding=None)  # a one-token step sees everything
    assert one[0, 0].all()
    assert _mask(q_len=3, k_len=3, causal=False, key_padding=None) is None


def test_padding_mask_hides_padded_keys_and_frees_queries_that_see_nothing():
    padding = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])  # row 0 left-padded by 2
    m = _mask(q_len=4, k_len=4, causal=True, key_padding=padding)
    assert m.shape == (2, 1, 4, 4)
    # row 0: queries 0 and 1 (padding) could see no real key: they see every key instead;
    # queries 2 and 3 see the real keys up to themselves
    assert torch.equal(m[0, 0], torch.tensor([[1, 1, 1, 1], [1, 1, 1, 1], [0, 0, 1, 0], [0, 0, 1, 1]]).bool())
    assert torch.equal(m[1, 0], torch.tril(torch.ones(4, 4)).bool())
    # a one-token decoding step of the padded row still hides its padding
    step = _mask(q_len=1, k_len=5, causal=True, key_padding=torch.tensor([[0, 0, 1, 1, 1]]))
    assert torch.equal(step[0, 0], torch.tensor([[0, 0, 1, 1, 1]]).bool())
    bidirectional = _mask(q_len=2, k_len=3, causal=False, key_padding=torch.tensor([[1, 0, 1]]))
    assert bidirectional.shape == (1, 1, 1, 3)  # one row of keys, broadcast over the queries
    assert torch.equal(bidirectional[0, 0, 0], torch.tensor([1, 0, 1]).bool())
    with pytest.raises(ValueError, match="covers 3 positions but there are 4 keys"):
        _mask(q_len=4, k_len=4, causal=True, key_padding=torch.ones(1, 3))
