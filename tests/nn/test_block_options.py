"""The block options by hand: norm placements sandwich and reordered, parallel blocks, QK-norm
per head and over the projection, the attention and final soft-caps, the z-loss (logits and
chunked paths) and the maximum attention logit an attention records when asked."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import zoo
from tests.conftest import tiny
from zoo.config.facts.blocks import QKNorm
from zoo.config.schema.convert import as_model_config
from zoo.config.schema.model import NormType
from zoo.config.schema.task import OutputLoss
from zoo.nn.attention import Attention, attention
from zoo.nn.block import Block
from zoo.nn.chunked_loss import IGNORE, chunked_linear_cross_entropy
from zoo.nn.position.none import NoPositions


def rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def randomise_norms(module: torch.nn.Module) -> None:
    """Norm gains away from 1 (and biases away from 0), so a norm applied in the wrong place shows."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5) if name.endswith("weight") else p.uniform_(-0.5, 0.5)


def block_and_input(**overrides):
    cfg = as_model_config(tiny(position="none", **overrides))
    block = Block(cfg, cross=False).eval()
    randomise_norms(block)
    x = torch.randn(2, 5, cfg.d_model)
    return block, x


def run_block(block, x):
    return block(x, positions=torch.arange(x.shape[1])[None], position=NoPositions(), mask=None, causal=True)


def attn_of(block, h):
    return block.self_attn(h, positions=torch.arange(h.shape[1])[None], position=NoPositions(), mask=None, causal=True)


@pytest.mark.parametrize("norm_type", ["layernorm", "rmsnorm"])
def test_sandwich_and_reordered_placements_by_their_formulas(norm_type):
    block, x = block_and_input(norm="sandwich", norm_type=norm_type)
    a, f = block.self_attn_sub, block.ff_sub
    with torch.no_grad():
        h = x + a.norm_out(attn_of(block, a.norm(x)))
        expected = h + f.norm_out(block.ff(f.norm(h)))
        torch.testing.assert_close(run_block(block, x), expected, rtol=0, atol=0)

    block, x = block_and_input(norm="reordered", norm_type=norm_type)
    a, f = block.self_attn_sub, block.ff_sub
    assert not hasattr(a, "norm_out")
    with torch.no_grad():
        h = x + a.norm(attn_of(block, x))
        expected = h + f.norm(block.ff(h))
        torch.testing.assert_close(run_block(block, x), expected, rtol=0, atol=0)


@pytest.mark.parametrize("norm", ["pre", "post", "sandwich", "reordered"])
def test_a_parallel_block_is_x_plus_both_branches_of_one_shared_norm(norm):
    block, x = block_and_input(block="parallel", norm=norm)
    assert block.ff_sub is None and block.cross_attn_sub is None  # one set of norms per block
    s = block.self_attn_sub
    with torch.no_grad():
        if norm == "pre":
            h = s.norm(x)
            expected = x + attn_of(block, h) + block.ff(h)
        elif norm == "post":
            expected = s.norm(x + attn_of(block, x) + block.ff(x))
        elif norm == "sandwich":
            h = s.norm(x)
            expected = x + s.norm_out(attn_of(block, h) + block.ff(h))
        else:
            expected = x + s.norm(attn_of(block, x) + block.ff(x))
        torch.testing.assert_close(run_block(block, x), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("norm", ["pre", "sandwich", "reordered"])
def test_a_parallel_block_with_two_norms_gives_each_branch_its_own(norm):
    block, x = block_and_input(block="parallel_two_norms", norm=norm)
    a, f = block.self_attn_sub, block.ff_sub
    with torch.no_grad():
        if norm == "pre":  # GPT-NeoX's use_parallel_residual
            expected = x + attn_of(block, a.norm(x)) + block.ff(f.norm(x))
        elif norm == "sandwich":
            expected = x + a.norm_out(attn_of(block, a.norm(x))) + f.norm_out(block.ff(f.norm(x)))
        else:
            expected = x + a.norm(attn_of(block, x)) + f.norm(block.ff(x))
        torch.testing.assert_close(run_block(block, x), expected, rtol=1e-6, atol=1e-6)


def test_parallel_in_a_decoder_with_cross_attention_adds_three_branches():
    cfg = as_model_config(tiny("encoder_decoder", "none", block="parallel"))
    block = Block(cfg, cross=True).eval()
    randomise_norms(block)
    x, memory = torch.randn(2, 4, cfg.d_model), torch.randn(2, 6, cfg.d_model)
    pos = torch.arange(4)[None]
    with torch.no_grad():
        got = block(x, positions=pos, position=NoPositions(), mask=None, causal=True, memory=memory)
        h = block.self_attn_sub.norm(x)
        expected = (
            x
            + block.self_attn(h, positions=pos, position=NoPositions(), mask=None, causal=True)
            + block.cross_attn(h, positions=pos, position=NoPositions(), mask=None, memory=memory)
            + block.ff(h)
        )
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)


# -- QK-norm -------------------------------------------------------------------------------


def qk_attention(qk_norm: QKNorm, n_kv_heads: int = 1) -> Attention:
    attn = Attention(
        d_model=8,
        n_heads=2,
        n_kv_heads=n_kv_heads,
        head_dim=4,
        bias=False,
        dropout=0.0,
        qk_norm=qk_norm,
        qk_norm_type=NormType.rmsnorm,
        norm_eps=1e-6,
    )
    randomise_norms(attn)
    attn.keep_weights = True  # the weights are softmax(q·kᵀ/sqrt(Dh)) of the normalized q and k
    return attn


@pytest.mark.parametrize("qk_norm", [QKNorm.head, QKNorm.projection])
def test_qk_norm_normalizes_per_head_or_over_the_projection_by_hand(qk_norm):
    torch.manual_seed(0)
    attn = qk_attention(qk_norm)
    x = torch.randn(1, 3, 8)
    with torch.no_grad():
        attn(x, positions=torch.arange(3)[None], position=NoPositions(), mask=None, causal=False)
        q, k, _ = attn.qkv_proj(x).split([8, 4, 4], dim=-1)  # (1, 3, H·Dh), (1, 3, Hkv·Dh) ...
        if qk_norm == QKNorm.head:  # over each head's Dh = 4
            q = rms(q.view(1, 3, 2, 4), 1e-6) * attn.q_norm.weight  # (1, 3, H, Dh)
            k = rms(k.view(1, 3, 1, 4), 1e-6) * attn.k_norm.weight
            assert attn.q_norm.weight.shape == (4,) and attn.k_norm.weight.shape == (4,)
        else:  # over the whole projection: H·Dh = 8 queries, Hkv·Dh = 4 keys
            q = (rms(q, 1e-6) * attn.q_norm.weight).view(1, 3, 2, 4)
            k = (rms(k, 1e-6) * attn.k_norm.weight).view(1, 3, 1, 4)
            assert attn.q_norm.weight.shape == (8,) and attn.k_norm.weight.shape == (4,)
        scores = torch.einsum("bthd,bshd->bhts", q, k.expand(1, 3, 2, 4)) / 2.0  # / sqrt(Dh)
        torch.testing.assert_close(attn.last_weights, scores.softmax(-1))


def test_head_and_projection_qk_norm_differ_where_heads_differ_in_size():
    """One head's queries ten times the other's: per head both come out at unit RMS; over the
    projection the small head stays small."""
    torch.manual_seed(0)
    head, proj = qk_attention(QKNorm.head), qk_attention(QKNorm.projection)
    for attn in (head, proj):
        with torch.no_grad():
            attn.q_norm.weight.fill_(1.0)
    q = torch.randn(1, 3, 8)
    q[..., 4:] *= 10
    with torch.no_grad():
        per_head = head._qk_heads(q, 2, "q_norm")  # (1, H, T, Dh)
        whole = proj._qk_heads(q, 2, "q_norm")
    torch.testing.assert_close(per_head.pow(2).mean(-1), torch.ones(1, 2, 3), rtol=1e-4, atol=1e-4)
    small, large = whole.pow(2).mean(-1)[0]  # (T,) each
    assert bool((large > 10 * small).all()) and bool((small + large).sub(2).abs().lt(1e-4).all())  # mean over H·Dh is 1


@pytest.mark.parametrize("qk_norm", ["head", "projection"])
def test_qk_norm_acts_before_the_rotation(qk_norm):
    """The attention weights of a RoPE model are those of queries and keys normalized first and
    rotated after (Qwen3's and OLMo 2's order), built here by hand."""
    model = zoo.build_model(tiny(position="rope", qk_norm=qk_norm, n_layers=1)).eval()
    attn = model.decoder.layers[0].self_attn
    attn.keep_weights = True
    ids = torch.randint(0, 37, (1, 6))
    scheme = model.decoder.position_for(0)
    with torch.no_grad():
        model(ids)
        h = model.decoder.layers[0].self_attn_sub.norm(model.embed(ids))
        q, k, _ = attn.qkv_proj(h).split([16, 16, 16], dim=-1)
        q, k = attn._qk_heads(q, 2, "q_norm"), attn._qk_heads(k, 2, "k_norm")  # normalized, then rotated
        q, k, _ = scheme.attend(q, k, torch.arange(6)[None], torch.arange(6)[None])
        weights = attention(q, k, torch.zeros_like(k), causal=True, math_path=True)[1]
    torch.testing.assert_close(attn.last_weights, weights)


def test_cross_attention_normalizes_its_queries_and_the_memory_keys():
    model = zoo.build_model(tiny("encoder_decoder", "none", qk_norm="head", n_layers=1, n_decoder_layers=1))
    cross = model.decoder.layers[0].cross_attn
    assert cross.q_norm.weight.shape == (8,) and cross.k_norm.weight.shape == (8,)
    memory = torch.randn(1, 5, 16) * 30
    with torch.no_grad():
        k, _ = cross._memory_kv(memory)  # (1, Hkv, S, Dh)
    torch.testing.assert_close(k.pow(2).mean(-1), torch.ones(1, 2, 5), rtol=1e-4, atol=1e-4)


# -- soft-caps ------------------------------------------------------------------------------


def test_attention_softcap_is_c_tanh_of_the_scaled_scores_before_bias_and_mask():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 4, 3) * 20, torch.randn(1, 2, 4, 3) * 20, torch.randn(1, 2, 4, 3)
    bias = torch.randn(1, 2, 4, 4)
    cap, scale = 5.0, 0.5
    out, weights = attention(q, k, v, bias=bias, causal=True, scale=scale, softcap=cap)
    scores = cap * torch.tanh(q @ k.transpose(-2, -1) * scale / cap) + bias
    assert float((scores - bias).abs().max()) <= cap
    scores = scores.masked_fill(~torch.ones(4, 4, dtype=torch.bool).tril(), float("-inf"))
    torch.testing.assert_close(weights, scores.softmax(-1))
    torch.testing.assert_close(out, scores.softmax(-1) @ v)
    # far below the cap, tanh is the identity: the capped attention is the plain one
    small = attention(q / 100, k, v, causal=True, softcap=1e4)[0]
    torch.testing.assert_close(small, attention(q / 100, k, v, causal=True)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("family", ["decoder_only", "encoder_only", "encoder_decoder"])
def test_final_softcap_bounds_the_logits_by_c_tanh(family):
    torch.manual_seed(0)
    capped = zoo.build_model(tiny(family, init_std=0.5, final_softcap=2.0)).eval()
    plain = zoo.build_model(tiny(family, init_std=0.5)).eval()
    plain.load_state_dict(capped.state_dict())
    ids = torch.randint(0, 37, (2, 6))
    inputs = {"input_ids": ids} if family != "encoder_decoder" else {"input_ids": ids, "decoder_input_ids": ids}
    with torch.no_grad():
        got, raw = capped(**inputs).logits, plain(**inputs).logits
    assert float(raw.abs().max()) > 4  # the cap has something to do
    assert float(got.abs().max()) < 2.0
    torch.testing.assert_close(got, 2.0 * torch.tanh(raw / 2.0))


# -- z-loss and the capped loss, on every output-loss path -----------------------------------


def _head_and_rows(final_softcap=None, bias=False):
    model = zoo.build_model(tiny(init_std=0.5, final_softcap=final_softcap, output_bias=bias))
    if bias:
        with torch.no_grad():
            model.output_bias.normal_()
    hidden = torch.randn(11, 16, requires_grad=True)
    targets = torch.randint(0, 37, (11,))
    targets[[2, 7]] = IGNORE
    return model, hidden, targets


@pytest.mark.parametrize("output_loss", [OutputLoss.logits, OutputLoss.chunked])
@pytest.mark.parametrize("final_softcap", [None, 3.0])
def test_z_loss_is_the_coefficient_times_the_mean_square_log_normaliser_by_hand(output_loss, final_softcap):
    model, hidden, targets = _head_and_rows(final_softcap, bias=True)
    coef = 0.01
    parts = model.token_losses(hidden, targets, z_loss=coef, output_loss=output_loss, chunk=4)
    with torch.no_grad():
        logits = model.logits(hidden)  # (N, V), capped
        kept = targets != IGNORE
        log_z = [math.log(sum(math.exp(z) for z in row)) for row in logits[kept].tolist()]
        z = sum(v * v for v in log_z) / len(log_z)
        ce = F.cross_entropy(logits, targets, ignore_index=IGNORE)
    assert parts.z is not None and abs(float(parts.z) - z) < 1e-4 * max(1.0, z)
    torch.testing.assert_close(parts.cross_entropy, ce, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(parts.loss.detach(), ce + coef * torch.tensor(z), rtol=1e-5, atol=1e-5)
    assert not parts.cross_entropy.requires_grad and not parts.z.requires_grad
    # without a coefficient the loss is the cross-entropy alone, as before
    alone = model.token_losses(hidden, targets, output_loss=output_loss, chunk=4)
    assert alone.z is None
    torch.testing.assert_close(alone.loss.detach(), ce, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("final_softcap", [None, 3.0])
def test_the_chunked_loss_with_cap_and_z_loss_has_autograds_gradients(final_softcap, smoothing):
    """The chunked loss computes its gradients in the forward pass, the cap's tanh and the
    z-loss's 2·log(Z)·softmax included: they equal autograd's through the whole logits."""
    torch.manual_seed(0)
    hidden = torch.randn(13, 8, requires_grad=True)
    weight = torch.randn(19, 8, requires_grad=True)
    bias = torch.randn(19, requires_grad=True)
    targets = torch.randint(0, 19, (13,))
    targets[[0, 5]] = IGNORE
    coef = 0.05
    loss = chunked_linear_cross_entropy(
        hidden, weight, targets, bias=bias, chunk=4, label_smoothing=smoothing, softcap=final_softcap, z_loss=coef
    )
    grads = torch.autograd.grad(loss, (hidden, weight, bias))
    logits = F.linear(hidden, weight, bias)
    if final_softcap is not None:
        logits = final_softcap * torch.tanh(logits / final_softcap)
    kept = targets != IGNORE
    reference = (
        F.cross_entropy(logits, targets, ignore_index=IGNORE, label_smoothing=smoothing)
        + coef * torch.logsumexp(logits[kept], -1).square().mean()
    )
    expected = torch.autograd.grad(reference, (hidden, weight, bias))
    torch.testing.assert_close(loss, reference, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_liger_is_refused_with_a_cap_or_a_z_loss_before_it_runs():
    model, hidden, targets = _head_and_rows(final_softcap=3.0)
    with pytest.raises(ValueError, match="liger takes neither"):
        model.token_losses(hidden, targets, output_loss=OutputLoss.liger)


# -- the maximum attention logit --------------------------------------------------------------


@pytest.mark.parametrize("n_kv_heads", [2, 1])
def test_max_logit_is_the_largest_allowed_scaled_score(n_kv_heads):
    torch.manual_seed(0)
    attn = Attention(d_model=8, n_heads=2, n_kv_heads=n_kv_heads, head_dim=4, bias=False, dropout=0.0, softcap=1.0)
    x = torch.randn(2, 5, 8) * 4
    pad = torch.tensor([[True] * 5, [False, True, True, True, True]])[:, None, None, :]  # (B, 1, 1, S)
    positions = torch.arange(5)[None]
    attn(x, positions=positions, position=NoPositions(), mask=pad, causal=True)
    assert attn.last_max_logit is None  # off by default
    attn.record_max_logit = True
    attn(x, positions=positions, position=NoPositions(), mask=pad, causal=True)
    q, k, _ = attn.qkv_proj(x).split([8, 4 * n_kv_heads, 4 * n_kv_heads], dim=-1)
    q = q.view(2, 5, 2, 4).transpose(1, 2)  # (B, H, T, Dh)
    k = k.view(2, 5, n_kv_heads, 4).transpose(1, 2).repeat_interleave(2 // n_kv_heads, dim=1)  # (B, H, S, Dh)
    scores = (q @ k.transpose(-2, -1)) / 2.0  # (B, H, T, S), before the soft-cap of 1
    allowed = torch.ones(5, 5, dtype=torch.bool).tril() & pad  # (B, 1, 5, 5)
    expected = scores.masked_fill(~allowed, float("-inf")).max()
    assert attn.last_max_logit.requires_grad is False and attn.last_max_logit.dim() == 0
    torch.testing.assert_close(attn.last_max_logit, expected.detach())
    assert float(attn.last_max_logit) > 1.0  # above the cap: it is read before capping
    # the largest score of all is at a masked place: the record leaves it out
    assert float(scores.detach().max()) >= float(expected.detach())
