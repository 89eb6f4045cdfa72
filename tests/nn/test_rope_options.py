"""RoPE's options beyond its base, checked against code nobody here wrote and by their effect:
the context-extension rules of `model.position.scaling` against transformers'
`modeling_rope_utils` (inv_freq and the attention factor) and its rotary embedding (cos and sin
past the original length), partial rotation, NoPE every k-th layer and a local base for
sliding layers."""

from __future__ import annotations

import pytest
import torch
import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

import zoo
from tests.conftest import tiny
from zoo.config import ConfigError, ModelConfig
from zoo.models.generate import generate
from zoo.nn.position import build_positions
from zoo.nn.position.none import NoPositions
from zoo.nn.position.rope import RotaryPositions

ORIGINAL = 16  # the training length the rules extend
# zoo's rule -> transformers' rope_type
HF_RULE = {"linear": "linear", "ntk": "dynamic", "dynamic": "dynamic", "yarn": "yarn"}


def hf_config(rule: str, factor: float, head_dim: int, fraction: float = 1.0, **extra) -> transformers.LlamaConfig:
    """A transformers config whose RoPE is `rule` at `factor` over heads of `head_dim`."""
    params = {"rope_type": HF_RULE[rule], "rope_theta": 10000.0, "factor": factor, **extra}
    if rule == "yarn":
        params["original_max_position_embeddings"] = ORIGINAL
    if fraction != 1.0:
        params["partial_rotary_factor"] = fraction
    return transformers.LlamaConfig(
        hidden_size=head_dim * 4, num_attention_heads=4, max_position_embeddings=ORIGINAL, rope_parameters=params
    )


def zoo_rope(rule: str, factor: float, head_dim: int, fraction: float = 1.0, **extra) -> RotaryPositions:
    return RotaryPositions(
        head_dim=head_dim,
        theta=10000.0,
        scale=factor,
        scaling=rule,
        max_seq_len=ORIGINAL,
        rotary_fraction=fraction,
        **extra,
    )


CASES = [
    (rule, factor, head_dim, fraction)
    for rule in ("linear", "ntk", "dynamic", "yarn")
    for factor in (2.0, 4.0, 8.0)
    for head_dim, fraction in ((16, 1.0), (64, 1.0), (64, 0.25))
]


@pytest.mark.parametrize("rule, factor, head_dim, fraction", CASES)
def test_a_rules_frequencies_and_attention_factor_are_transformers(rule, factor, head_dim, fraction):
    """Static NTK is transformers' dynamic rule at the length original·(2·factor - 1)/factor,
    where its base is theta·factor^(d/(d-2)); dynamic is checked at a length past the original."""
    length = {"ntk": ORIGINAL * (2 * factor - 1) / factor, "dynamic": 3 * ORIGINAL}.get(rule)
    config = hf_config(rule, factor, head_dim, fraction)
    theirs, their_factor = ROPE_INIT_FUNCTIONS[HF_RULE[rule]](config, None, seq_len=length)
    ours = zoo_rope(rule, factor, head_dim, fraction)
    # linear divides the positions instead of the frequencies: the same angles
    freqs = ours.frequencies(torch.arange(3 * ORIGINAL)[None]) if rule == "dynamic" else ours.inv_freq
    torch.testing.assert_close(freqs / ours.scale, theirs, rtol=1e-6, atol=0)
    assert ours.multiplier == pytest.approx(their_factor, rel=1e-12)
    assert (ours.multiplier != 1.0) == (rule == "yarn")


@pytest.mark.parametrize("rule, factor, head_dim, fraction", [c for c in CASES if c[0] != "ntk"])
@pytest.mark.parametrize("length", [ORIGINAL // 2, 3 * ORIGINAL])
def test_cos_and_sin_within_and_past_the_original_length_are_transformers(rule, factor, head_dim, fraction, length):
    """A forward of `length` positions, within the original length and past it (the dynamic
    rule's frequencies follow it), through transformers' rotary embedding."""
    config = hf_config(rule, factor, head_dim, fraction)
    positions = torch.arange(length)[None]  # (1, T)
    cos, sin = LlamaRotaryEmbedding(config)(torch.zeros(1, 1, head_dim), positions)  # (1, T, R)
    our_cos, our_sin = zoo_rope(rule, factor, head_dim, fraction).angles(positions, torch.float32)  # (1, 1, T, R)
    torch.testing.assert_close(our_cos[:, 0], cos, rtol=0, atol=1e-5)
    torch.testing.assert_close(our_sin[:, 0], sin, rtol=0, atol=1e-5)


def test_yarns_own_parameters_are_transformers():
    extra = {"beta_fast": 16.0, "beta_slow": 2.0, "attention_factor": 1.3}
    theirs, their_factor = ROPE_INIT_FUNCTIONS["yarn"](hf_config("yarn", 4.0, 32, **extra), None)
    ours = zoo_rope("yarn", 4.0, 32, **extra)
    torch.testing.assert_close(ours.inv_freq, theirs, rtol=1e-6, atol=0)
    assert ours.multiplier == their_factor == 1.3
    assert not torch.allclose(ours.inv_freq, zoo_rope("yarn", 4.0, 32).inv_freq)  # the betas moved the ramp


@pytest.mark.parametrize("rule", ["linear", "ntk", "dynamic", "yarn"])
def test_a_factor_of_one_is_plain_rope(rule):
    plain, ruled = RotaryPositions(head_dim=16), zoo_rope(rule, 1.0, 16)
    q, positions = torch.randn(1, 2, 40, 16), torch.arange(40)[None]
    assert torch.equal(ruled.rotate(q, positions), plain.rotate(q, positions))


def test_partial_rotation_leaves_the_other_dimensions_alone():
    rope = RotaryPositions(head_dim=16, rotary_fraction=0.25)
    q, positions = torch.randn(1, 2, 5, 16), torch.arange(5)[None]
    turned = rope.rotate(q, positions)
    assert rope.rotary_dims == 4
    assert torch.equal(turned[..., 4:], q[..., 4:])
    assert torch.equal(turned[..., :4], RotaryPositions(head_dim=4).rotate(q[..., :4], positions))


def test_nope_every_k_leaves_every_kth_layer_without_positions():
    cfg = ModelConfig(**{**tiny(position="rope", n_layers=6), "position": {"kind": "rope", "nope_every": 3}})
    schemes = build_positions(cfg, causal=True, n_layers=6)
    assert [isinstance(s, NoPositions) for s in schemes] == [False, False, True, False, False, True]
    assert all(isinstance(s, RotaryPositions) for i, s in enumerate(schemes) if (i + 1) % 3)


def test_the_local_base_turns_the_sliding_layers_only():
    position = {"kind": "rope", "theta": 1e6, "theta_local": 1e4}
    cfg = ModelConfig(
        **tiny(position="rope", n_layers=4, attention="sliding", window=8, global_every=2) | {"position": position}
    )
    schemes = build_positions(cfg, causal=True, n_layers=4)
    local, full = RotaryPositions(head_dim=cfg.head_dim, theta=1e4), RotaryPositions(head_dim=cfg.head_dim, theta=1e6)
    expected = [local, full, local, full]  # layers 2 and 4 are global (global_every=2)
    assert all(torch.equal(s.inv_freq, e.inv_freq) for s, e in zip(schemes, expected, strict=True))


@pytest.mark.parametrize(
    "position, extra",
    [
        ({"kind": "rope", "nope_every": 2}, {}),
        ({"kind": "rope", "rotary_fraction": 0.5}, {}),
        ({"kind": "rope", "theta_local": 100.0}, {"attention": "sliding", "window": 4, "global_every": 2}),
        ({"kind": "rope", "scaling": "yarn", "scale": 4.0, "original_max_seq_len": 8}, {}),
        ({"kind": "rope", "scaling": "ntk", "scale": 4.0}, {}),
        ({"kind": "rope", "scaling": "dynamic", "scale": 4.0, "original_max_seq_len": 6}, {}),
    ],
    ids=["nope", "partial", "local-base", "yarn", "ntk", "dynamic"],
)
def test_each_option_changes_the_logits_and_decodes_the_same_with_a_cache(position, extra):
    cfg = {**tiny(position="rope", n_layers=4, max_seq_len=16, init_std=0.5, **extra), "position": position}
    torch.manual_seed(0)
    model = zoo.build_model(cfg).eval()
    torch.manual_seed(0)
    plain = zoo.build_model({**cfg, "position": {"kind": "rope"}}).eval()
    ids = torch.randint(0, 37, (2, 12))
    with torch.no_grad():
        assert not torch.allclose(model(ids).logits, plain(ids).logits, atol=1e-4)
        cached = generate(model, ids[:, :4], max_new_tokens=10, use_cache=True)
        uncached = generate(model, ids[:, :4], max_new_tokens=10, use_cache=False)
    assert cached.tolist() == uncached.tolist()


@pytest.mark.parametrize(
    "position, extra, message",
    [
        (
            {"kind": "alibi", "nope_every": 2},
            {},
            "model.position.nope_every only applies to model/position=rope, not alibi",
        ),
        ({"kind": "rope", "nope_every": 1}, {}, "model.position.nope_every must be >= 2"),
        ({"kind": "rope", "nope_every": 3}, {}, "model.position.nope_every=3 exceeds model.n_layers=2"),
        ({"kind": "rope", "rotary_fraction": 0.2}, {}, "rotates 1 of each head's 8 dimensions"),
        ({"kind": "rope", "theta_local": 100.0}, {}, "model.position.theta_local is the base of sliding-window layers"),
        (
            {"kind": "rope", "beta_fast": 8.0},
            {},
            "model.position.beta_fast only applies to model.position.scaling=yarn",
        ),
        ({"kind": "rope", "scaling": "yarn", "beta_slow": 40.0}, {}, "must be > beta_slow (40.0)"),
        ({"kind": "learned", "scaling": "yarn"}, {}, "model.position.scaling only applies to model/position=rope"),
    ],
)
def test_an_option_where_it_does_not_apply_is_refused_on_one_line(position, extra, message):
    with pytest.raises(ConfigError) as refused:
        ModelConfig(**{**tiny(position="rope", **extra), "position": position})
    assert message in str(refused.value) and "\n" not in str(refused.value)
