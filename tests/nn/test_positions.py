"""Properties of each position scheme, checked through the shared hooks."""

from __future__ import annotations

import math

import pytest
import torch

import zoo
from tests.conftest import FAMILIES, POSITIONS, tiny
from zoo.config.schema.convert import as_model_config
from zoo.nn.attention import Attention, attention
from zoo.nn.position import POSITIONS as REGISTRY
from zoo.nn.position import build_position
from zoo.nn.position.alibi import alibi_slopes
from zoo.nn.position.relative import relative_bucket
from zoo.nn.position.rope import RotaryPositions
from zoo.nn.position.shaw import ShawPositions


def scheme(kind, causal=True, **kw):
    return build_position(as_model_config(tiny(position=kind, **kw)), causal=causal)


def test_registry_covers_every_configurable_kind():
    assert sorted(k.value for k in REGISTRY) == sorted(POSITIONS)


def test_rope_scores_depend_only_on_the_offset():
    rope = RotaryPositions(head_dim=8)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def score(m, n):
        qr, kr, _ = rope.attend(q, k, torch.tensor([[m]]), torch.tensor([[n]]))
        return (qr * kr).sum()

    assert torch.allclose(score(3, 1), score(10, 8), atol=1e-5)
    assert torch.allclose(score(100, 95), score(5, 0), atol=1e-4)
    assert not torch.allclose(score(3, 1), score(3, 2), atol=1e-4)
    # rotation keeps the norm
    qr, _, _ = rope.attend(q, k, torch.tensor([[7]]), torch.tensor([[0]]))
    assert torch.allclose(qr.norm(), q.norm(), atol=1e-5)


def test_rope_linear_interpolation_divides_positions():
    x = torch.randn(2, 3, 5, 8)
    pos = torch.arange(5)[None].expand(2, 5)
    stretched = RotaryPositions(head_dim=8, scale=4.0).rotate(x, 4 * pos)
    assert torch.allclose(stretched, RotaryPositions(head_dim=8).rotate(x, pos), atol=1e-5)


def test_rope_theta_changes_frequencies():
    assert not torch.equal(RotaryPositions(head_dim=8, theta=500000.0).inv_freq, RotaryPositions(head_dim=8).inv_freq)


@pytest.mark.parametrize("kind", ["alibi", "relative", "shaw"])
@pytest.mark.parametrize("causal", [True, False])
def test_score_biases_are_translation_invariant(kind, causal):
    pos_scheme = scheme(kind, causal=causal)
    q, k = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 6, 8)
    qp, kp = torch.arange(5)[None] + 3, torch.arange(6)[None]
    _, _, bias = pos_scheme.attend(q, k, qp, kp)
    _, _, shifted = pos_scheme.attend(q, k, qp + 40, kp + 40)
    assert bias is not None and bias.shape[-2:] == (5, 6)
    assert torch.allclose(bias, shifted)


def test_alibi_slopes_follow_the_paper():
    assert torch.allclose(alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)]))
    assert torch.allclose(alibi_slopes(4), torch.tensor([2.0 ** -(2 * (i + 1)) for i in range(4)]))
    six = alibi_slopes(6)  # not a power of two: 4 slopes of n=4, then the odd ones of n=8
    assert torch.allclose(six, torch.tensor([2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]))


def test_alibi_bias_is_minus_slope_times_distance():
    pos_scheme = scheme("alibi")
    _, _, bias = pos_scheme.attend(
        torch.zeros(1, 2, 3, 8), torch.zeros(1, 2, 3, 8), torch.arange(3)[None], torch.arange(3)[None]
    )
    slopes = alibi_slopes(2)
    assert torch.allclose(bias[0, 1, 2], -slopes[1] * torch.tensor([2.0, 1.0, 0.0]))


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (8, 20), (4, 10)])
def test_t5_buckets_match_hugging_face(bidirectional, num_buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention  # a test dependency: fails, never skips

    offsets = torch.arange(-300, 300)
    ours = relative_bucket(offsets, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    theirs = T5Attention._relative_position_bucket(
        offsets, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert torch.equal(ours, theirs)


def test_t5_buckets_match_hugging_face_where_distance_1_is_already_logarithmic():
    """3 causal buckets: only distance 0 is exact, and distance 1 already takes the log branch."""
    from transformers.models.t5.modeling_t5 import T5Attention

    offsets = torch.arange(-10, 1)
    ours = relative_bucket(offsets, bidirectional=False, num_buckets=3, max_distance=4)
    theirs = T5Attention._relative_position_bucket(offsets, bidirectional=False, num_buckets=3, max_distance=4)
    # distance 1: 1 + floor(log(1 / 1) / log(4 / 1) · 2) = 1; distance 2: 1 + floor(0.5 · 2) = 2
    assert torch.equal(ours, theirs) and ours[-2:].tolist() == [1, 0] and ours[-3] == 2


@pytest.mark.parametrize(
    "bidirectional, expected",
    [
        # offset = key position - query position. Bidirectional, 32 buckets: 16 per direction, keys
        # after the query in the upper half; distances below 8 exact, then log-spaced up to 128:
        # 8 + floor(log(d / 8) / log(128 / 8) * 8), capped at 15.
        (True, {0: 0, -1: 1, 1: 17, -7: 7, 7: 23, -8: 8, 8: 24, -20: 10, 20: 26, -200: 15, 200: 31}),
        # causal, 32 buckets for the past only: distances below 16 exact, then
        # 16 + floor(log(d / 16) / log(128 / 16) * 16), capped at 31; every future key is bucket 0
        (False, {0: 0, -1: 1, 1: 0, 5: 0, -15: 15, -16: 16, -20: 17, -64: 26, -200: 31}),
    ],
)
def test_t5_buckets_by_hand(bidirectional, expected):
    """Raffel et al. 2020's buckets worked by hand, so the direction of the offset and the two
    halves are checked without any reference library."""
    offsets = torch.tensor(list(expected))
    got = relative_bucket(offsets, bidirectional=bidirectional, num_buckets=32, max_distance=128)
    assert dict(zip(expected, got.tolist())) == expected


def test_rope_rotates_each_pair_counterclockwise_by_position_times_frequency():
    """RoFormer eq. (13)-(15) with the rotate-half pairing: dimension i and i + Dh/2 form a 2-D vector
    turned by angle m * theta^(-2i/Dh) at position m, counterclockwise: (1, 0) -> (cos a, sin a)."""
    rope = RotaryPositions(head_dim=4, theta=100.0)
    x = torch.tensor([1.0, 0.0, 0.0, 1.0]).view(1, 1, 1, 4)  # pair 0 = (1, 0), pair 1 = (0, 1)
    m = 3
    out = rope.rotate(x, torch.tensor([[m]]))[0, 0, 0]
    a0, a1 = m * 1.0, m * 100.0**-0.5  # frequencies theta^0 and theta^(-2/4)
    expected = torch.tensor([math.cos(a0), -math.sin(a1), math.sin(a0), math.cos(a1)])
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)
    assert torch.equal(rope.rotate(x, torch.tensor([[0]])), x)  # position 0 is the identity


def test_t5_bias_is_shared_across_layers_and_shaw_is_not():
    t5 = zoo.build_model(tiny("encoder_decoder", "relative", n_layers=3))
    assert len(t5.encoder.positions) == 1 and len(t5.decoder.positions) == 1
    assert t5.encoder.positions[0].bidirectional and not t5.decoder.positions[0].bidirectional
    shaw = zoo.build_model(tiny("decoder_only", "shaw", n_layers=3))
    assert len(shaw.decoder.positions) == 3


def test_shaw_clips_offsets():
    pos_scheme = ShawPositions(head_dim=8, clip=2)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 10, 8)
    _, _, bias = pos_scheme.attend(q, k, torch.tensor([[9]]), torch.arange(10)[None])
    # keys 0..7 are all >= 2 steps in the past: one clipped embedding, one bias value
    assert torch.allclose(bias[0, 0, 0, :8], bias[0, 0, 0, 0].expand(8))
    assert not torch.allclose(bias[0, 0, 0, 7], bias[0, 0, 0, 8])


def _count(kind, **kw):
    return sum(p.numel() for p in zoo.build_model(tiny(position=kind, **kw)).parameters())


@pytest.mark.parametrize("family", FAMILIES)
def test_learned_positions_add_max_len_times_d_model(family):
    stacks = 2 if family == "encoder_decoder" else 1
    assert _count("learned", family=family) - _count("none", family=family) == stacks * 32 * 16
    for kind in ("sinusoidal", "rope", "alibi"):
        assert _count(kind, family=family) == _count("none", family=family)


def test_learned_positions_refuse_longer_inputs():
    model = zoo.build_model(tiny(position="learned", max_seq_len=8))
    model(torch.randint(0, 37, (1, 8)))
    with pytest.raises(ValueError, match=r"position 8 .*max_seq_len=8"):
        model(torch.randint(0, 37, (1, 9)))


@pytest.mark.parametrize("kind", ["sinusoidal", "relative", "shaw", "alibi", "rope"])
def test_other_schemes_run_past_the_training_length(kind):
    model = zoo.build_model(tiny(position=kind, max_seq_len=8)).eval()
    out = model(torch.randint(0, 37, (1, 20)))
    assert torch.isfinite(out.logits).all()


def test_without_positions_self_attention_is_permutation_equivariant():
    model = zoo.build_model(tiny("encoder_only", "none")).eval()
    ids = torch.randint(0, 37, (1, 7))
    perm = torch.randperm(7)
    assert torch.allclose(model(ids).logits[:, perm], model(ids[:, perm]).logits, atol=1e-5)
    with_positions = zoo.build_model(tiny("encoder_only", "sinusoidal")).eval()
    assert not torch.allclose(with_positions(ids).logits[:, perm], with_positions(ids[:, perm]).logits, atol=1e-4)


def test_attention_parameter_count_does_not_depend_on_heads():
    counts = {
        h: sum(
            p.numel()
            for p in Attention(
                d_model=24, n_heads=h, n_kv_heads=h, head_dim=24 // h, bias=True, dropout=0.0
            ).parameters()
        )
        for h in (1, 2, 4, 8)
    }
    assert len(set(counts.values())) == 1


def test_cross_attention_scores_are_target_by_source():
    model = zoo.build_model(tiny("encoder_decoder", "sinusoidal")).eval()
    cross = model.decoder.layers[0].cross_attn
    cross.keep_weights = True
    model(torch.randint(0, 37, (2, 10)), decoder_input_ids=torch.randint(0, 37, (2, 20)))
    assert cross.last_weights.shape == (2, 2, 20, 10)


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
def test_math_path_equals_sdpa(n_kv_heads, causal, with_bias, with_mask):
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, n_kv_heads, 7, 8), torch.randn(2, n_kv_heads, 7, 8)
    bias = torch.randn(2, 4, 5, 7) if with_bias else None
    mask = torch.ones(2, 1, 5, 7, dtype=torch.bool)
    mask[0, ..., 5:] = False
    mask = mask if with_mask else None
    fast, _ = attention(q, k, v, bias=bias, mask=mask, causal=causal)
    slow, weights = attention(q, k, v, bias=bias, mask=mask, causal=causal, math_path=True)
    assert torch.allclose(fast, slow, atol=1e-5)
    if causal:
        future = torch.ones(5, 7).triu(3).bool()  # query i sees keys j <= i + S - T = i + 2
        assert (weights[..., future] == 0).all()
