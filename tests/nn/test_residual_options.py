"""The value residual, value embeddings and hyper-connections as computed: each layer's hook mixes
its values as the rows write, the hooks reach the attention of every family's stacks, the
hyper-connections' site is the paper's formula and their start is the plain residual, and
recomputing the layers in backward (model.checkpoint_activations) gives the same gradients.
Cached decoding (growing and static caches) with each option gives the logits of the whole
sequence: tests/models/test_decoding_rows.py."""

from __future__ import annotations

import pytest
import torch

import zoo
from tests.conftest import FAMILIES, tiny
from tests.covering import model_axes, pairwise
from tests.nn.residual_rows import OPTIONS, perturb
from zoo.config import ModelConfig
from zoo.nn.hyper import HyperConnection
from zoo.nn.values import ValueStream


def _inputs(family: str, ids: torch.Tensor) -> dict:
    return {"input_ids": ids} if family != "encoder_decoder" else {"input_ids": ids, "decoder_input_ids": ids}


def test_the_hooks_mix_the_values_as_the_rows_write():
    cfg = ModelConfig(**tiny(n_layers=4, n_heads=2, n_kv_heads=1, value_residual="learned", value_embeds=1))
    stream = zoo.build_model(cfg).decoder.values
    assert isinstance(stream, ValueStream)
    with torch.no_grad():
        stream.residual_lambdas.copy_(torch.tensor([0.1, 0.2, 0.3]))
        stream.embed_lambdas.copy_(torch.tensor([[0.5, 2.0], [3.0, -1.0]]))
    ids = torch.randint(0, cfg.vocab_size, (2, 5))
    ve = stream.tables[0](ids).view(2, 5, 1, cfg.head_dim).transpose(1, 2)  # (B, Hkv, T, Dh)
    vs = [torch.randn(2, 1, 5, cfg.head_dim) for _ in range(4)]
    hooks = stream.hooks(ids)
    first = 0.5 * vs[0] + 2.0 * ve  # layer 0 holds table 0: v_1 is its values as it attends
    torch.testing.assert_close(hooks[0](vs[0]), first)
    torch.testing.assert_close(hooks[1](vs[1]), 0.9 * vs[1] + 0.1 * first)
    torch.testing.assert_close(hooks[2](vs[2]), 0.8 * vs[2] + 0.2 * first)
    torch.testing.assert_close(hooks[3](vs[3]), 3.0 * (0.7 * vs[3] + 0.3 * first) - 1.0 * ve)  # table 0 again
    fixed = zoo.build_model(ModelConfig(**{**cfg.to_dict(), "value_residual": "fixed", "value_embeds": 0}))
    hooks = fixed.decoder.values.hooks(None)
    hooks[0](vs[0])
    torch.testing.assert_close(hooks[2](vs[2]), 0.5 * vs[2] + 0.5 * vs[0])


# the hyper-connections' starts: every pair of kinds of family × norm placement × block × kind
# (a covering design, tests/covering.py), each family's rows checked by its test
HYPER_STARTS = pairwise(
    {
        **model_axes("family"),
        "norm": ["pre", "sandwich", "reordered"],
        **model_axes("block"),
        "kind": ["static", "dynamic"],
    }
)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_residual_options_reach_a_familys_stacks_and_hyper_connections_start_plain(subtests, family):
    """The value options reach the self-attention of each of the family's stacks; its
    hyper-connections start as the plain residual in each of its rows of HYPER_STARTS."""
    with subtests.test("the value options reach every stack's self-attention"):
        assert_the_value_options_reach_every_stacks_self_attention(family)
    for row in (row for row in HYPER_STARTS if row["family"] == family):
        shape = dict(norm=row["norm"], block=row["block"], kind=row["kind"])
        with subtests.test("hyper-connections start as the plain residual", **shape):
            assert_hyper_connections_start_as_the_plain_residual(family, **shape)


def assert_the_value_options_reach_every_stacks_self_attention(family):
    """The same weights: value embeddings with λ = (1, 0) are the plain model bit for bit, and
    each option away from its identity changes the logits of every stack it is in."""
    plain = zoo.build_model(tiny(family, "rope"), init_seed=0).eval()
    ids = torch.randint(0, 37, (2, 7))
    with torch.no_grad():
        expected = plain(**_inputs(family, ids)).logits
    for options in (dict(value_embeds=1), dict(value_residual="fixed")):
        model = zoo.build_model(tiny(family, "rope", **options), init_seed=0).eval()
        model.load_state_dict(plain.state_dict(), strict=False)
        stacks = [m for m in model.modules() if isinstance(m, ValueStream)]
        assert len(stacks) == (2 if family == "encoder_decoder" else 1)
        with torch.no_grad():
            if "value_embeds" in options:
                for stream in stacks:
                    stream.embed_lambdas.copy_(torch.tensor([1.0, 0.0]).expand_as(stream.embed_lambdas))
                assert torch.equal(model(**_inputs(family, ids)).logits, expected)
                for stream in stacks:
                    stream.embed_lambdas[:, 1] = 1.0
            assert not torch.allclose(model(**_inputs(family, ids)).logits, expected, atol=1e-4)


def test_a_hyper_connection_is_the_papers_width_and_depth_connection():
    """Zhu et al. 2024, Algorithm 2, written out with loops over the streams."""
    cfg = ModelConfig(**tiny(hyper_connections="dynamic", residual_streams=3, norm_type="rmsnorm", bias=False))
    site = HyperConnection(cfg, site=4)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in site.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    H = torch.randn(2, 5, 3, cfg.d_model, generator=g)  # (B, T, n, D)
    W = torch.randn(cfg.d_model, cfg.d_model, generator=g)

    def branch(h):
        return torch.tanh(h @ W)

    out = site(H, branch)
    n = 3
    normed = site.norm(H)
    alpha = site.alpha_start + site.alpha + site.alpha_scale * torch.tanh(normed @ site.alpha_fn)  # (B, T, n, n+1)
    beta = site.beta + site.beta_scale * torch.tanh(normed @ site.beta_fn)[..., 0]  # (B, T, n)
    h = sum(alpha[..., s, 0, None] * H[..., s, :] for s in range(n))
    f = branch(h)
    for t in range(n):
        carried = sum(alpha[..., s, t + 1, None] * H[..., s, :] for s in range(n))
        torch.testing.assert_close(out[..., t, :], carried + beta[..., t, None] * f, rtol=1e-5, atol=1e-5)


def assert_hyper_connections_start_as_the_plain_residual(family, norm, block, kind):
    """At their start every stream carries the plain residual stream (the branch reads stream
    j mod n, every stream takes the branch whole), so the n summed streams, normalized, give the
    plain model's logits (a norm's eps is what tells n·x from x: it is made negligible here)."""
    shape = dict(norm=norm, block=block, norm_type="rmsnorm", norm_eps=1e-12)
    plain = zoo.build_model(tiny(family, "rope", **shape), init_seed=0).eval()
    model = zoo.build_model(
        tiny(family, "rope", **shape, hyper_connections=kind, residual_streams=3), init_seed=0
    ).eval()
    model.load_state_dict(plain.state_dict(), strict=False)
    ids = torch.randint(0, 37, (2, 7))
    with torch.no_grad():
        torch.testing.assert_close(
            model(**_inputs(family, ids)).logits, plain(**_inputs(family, ids)).logits, rtol=1e-4, atol=1e-5
        )


@pytest.mark.parametrize("option", list(OPTIONS))
def test_recomputing_the_layers_in_backward_gives_the_same_gradients(option):
    """v_1 and the streams cross the layers: model.checkpoint_activations recomputes each layer
    alone in backward, and must reach the same gradients."""
    grads = []
    for recompute in (False, True):
        model = zoo.build_model(tiny(checkpoint_activations=recompute, **OPTIONS[option]), init_seed=0).train()
        perturb(model)
        ids = torch.randint(0, 37, (2, 9), generator=torch.Generator().manual_seed(0))
        model(ids).logits.square().mean().backward()
        grads.append({name: p.grad for name, p in model.named_parameters()})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], rtol=1e-5, atol=1e-7, msg=name)
