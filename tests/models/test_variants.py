"""Every pair of kinds of family × position scheme × norm placement × norm type × block × QK-norm (a
covering design, tests/covering.py) on a tiny config with sharp weights (init_std 0.5: logits far
from ties, so a wrong index or mask moves them well past the tolerance), one model a row: shapes,
backward, padding invariance (left padding of a decoder's prompts too), which tokens a position
sees, cached decoding, SDPA's fused kernel (Shaw's scheme aside), no Python loop over heads or
positions (the operations a training pass dispatches do not change with either), independent
layers, tied and untied output projections, and the row with sliding-window attention: local and
global layers training, and a covering window equal to full attention."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import profile
from torch.utils._python_dispatch import TorchDispatchMode

import zoo
from tests.conftest import CAUSAL_FAMILIES, FAMILIES, sharp, tiny
from tests.covering import cases, model_axes
from tests.nn.windows import (
    assert_a_covering_window_is_full_attention,
    assert_trains_with_local_and_global_layers,
)
from zoo.config import ConfigError, ModelConfig
from zoo.nn.position import POSITIONS as POSITION_CLASSES

# float32 rounding through a stack with weights at std 0.5 reaches about 2e-5 on logits of
# about 6 (post-norm, encoder-decoder); a wrong mask, index or position moves them by O(1)
ATOL = 5e-5

# the causal families with every pair of kinds of two axes (a covering design), and each other
# family with each kind once: 35 models of the product's 1,512
KINDS = model_axes("position", "norm", "norm_type", "block", "qk_norm")


def accepted(row: dict) -> bool:
    """The config takes the row (parallel_two_norms refuses post-norm): no weight is built."""
    kinds = dict(row)
    try:
        ModelConfig(**sharp(kinds.pop("family"), kinds.pop("position"), **kinds))
    except ConfigError:
        return False
    return True


def each_kind_once(family: str) -> list:
    """Rows giving `family` each kind of each axis once: the i-th kinds of each, the blocks
    turned on where a row would be refused."""
    out = []
    for i in range(max(map(len, KINDS.values()))):
        for turn in range(len(KINDS["block"])):
            row = {axis: values[(i + (turn if axis == "block" else 0)) % len(values)] for axis, values in KINDS.items()}
            if accepted({"family": family, **row}):
                out.append(pytest.param(family, *row.values(), id="-".join((family, *row.values()))))
                break
    return out


ROWS = cases({"family": CAUSAL_FAMILIES, **KINDS}, accepted) + [
    row for f in FAMILIES if f not in CAUSAL_FAMILIES for row in each_kind_once(f)
]


def build(family, position, norm="pre", norm_type="layernorm", **kw):
    model = zoo.build_model(sharp(family, position, norm=norm, norm_type=norm_type, **kw))
    return model.eval()


def run(model, ids, mask=None, dec=None, dec_mask=None, **kw):
    if model.config.family.value == "encoder_decoder":
        dec = ids[:, : max(1, ids.shape[1] - 2)] if dec is None else dec
        return model(ids, attention_mask=mask, decoder_input_ids=dec, decoder_attention_mask=dec_mask, **kw)
    return model(ids, attention_mask=mask, **kw)


@pytest.mark.parametrize("family, position, norm, norm_type, block, qk_norm", ROWS)
def test_a_row_trains_sees_what_its_family_sees_and_decodes_from_its_cache(
    subtests, family, position, norm, norm_type, block, qk_norm
):
    """One model a row of the design: its shapes, backward and padding invariance; which tokens a
    position sees (a decoder only the past, an encoder the whole input); cached decoding where it
    decodes; and no Python loop over heads or positions in its training pass."""
    model = build(family, position, norm, norm_type, block=block, qk_norm=qk_norm)
    with subtests.test("shapes, backward, finite gradients"):
        assert_shapes_backward_and_finite(model.train())
    model.eval()
    with subtests.test("padding"):
        assert_padding_invariance(model, family)
    if family in CAUSAL_FAMILIES:
        with subtests.test("causal"):
            assert_causality(model, family)
        with subtests.test("cached decoding"):
            assert_cached_decoding_equals_full_forward(model, family)
    else:
        with subtests.test("the future reaches every position"):
            assert_sees_the_future(model)
    if family == "decoder_only":
        with subtests.test("a left-padded batch"):
            assert_left_padded_batch_matches_unpadded_rows(model)
    with subtests.test("SDPA's fused kernel, with padding"):
        assert_fused_attention(model, family, position)
    with subtests.test("layers start with independent weights"):
        assert_independent_layers(model, family)
    kinds = dict(norm=norm, norm_type=norm_type, block=block, qk_norm=qk_norm)
    with subtests.test("tied and untied output projection"):
        assert_tied_and_untied(family, position, **kinds)
    with subtests.test("sliding window: trains with local and global layers"):
        assert_trains_with_local_and_global_layers(family, position, **kinds)
    with subtests.test("sliding window: a covering window is full attention"):
        assert_a_covering_window_is_full_attention(family, position, **kinds)
    with subtests.test("no Python loop over heads or positions"):
        base = count_ops(family, position, n_heads=2, T=8, **kinds)
        assert base > 0
        assert count_ops(family, position, n_heads=4, T=8, **kinds) == base
        assert count_ops(family, position, n_heads=2, T=24, **kinds) == base


def assert_fused_attention(model, family, position):
    """Only Shaw's relative value term needs the attention weights (SDPA's math path); every other
    scheme, with padding, goes through SDPA's fused CPU kernel."""
    ids = torch.randint(4, 37, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, -2:] = 0
    with torch.no_grad(), profile() as prof:
        run(model, ids, mask)
    kernels = {e.key for e in prof.key_averages() if "attention" in e.key}
    needs_weights = POSITION_CLASSES[position].needs_attention_weights
    assert needs_weights == (position == "shaw")  # a new scheme that needs the weights must say why here
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in kernels or needs_weights, kernels
    if not needs_weights:
        assert not any("math" in k for k in kernels), kernels


class CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def count_ops(family, position, n_heads, T, **kinds) -> int:
    """The tensor operations a training forward and backward dispatch at n_heads heads and T tokens."""
    cfg = tiny(family, position, d_model=32, n_heads=n_heads, max_seq_len=64, **kinds)
    model = zoo.build_model(cfg)
    ids = torch.randint(0, 37, (2, T))
    kwargs = {"decoder_input_ids": ids} if family == "encoder_decoder" else {}
    with CountOps() as counter:
        model(ids, **kwargs).logits.sum().backward()
    return counter.count


def assert_sees_the_future(model):
    """An encoder: changing the last token changes the output at every position."""
    ids = torch.tensor([[5, 9, 2, 7, 11]])
    edited = ids.clone()
    edited[0, -1] = 20
    with torch.no_grad():
        a, b = model(ids).hidden_states, model(edited).hidden_states  # (1, T, D)
    assert bool(((a - b).abs().amax(-1)[0] > 1e-6).all())


def assert_shapes_backward_and_finite(model):
    """Logits and hidden states of the right shapes, finite, and a finite gradient for every parameter."""
    ids = torch.randint(0, 37, (3, 9))
    out = run(model, ids)
    T = out.logits.shape[1]
    assert out.logits.shape == (3, T, 37)
    assert out.hidden_states.shape == (3, T, 16)
    assert torch.isfinite(out.logits).all()
    out.logits.logsumexp(-1).mean().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, f"{name} got no gradient"
        assert torch.isfinite(p.grad).all(), f"{name} has a non-finite gradient"


def assert_causality(model, family):
    """Changing decoder token t+1 leaves the outputs at positions <= t unchanged."""
    src = torch.randint(0, 37, (2, 8))
    dec = torch.randint(0, 37, (2, 8))
    t = 4
    changed = dec.clone()
    changed[:, t + 1] = (changed[:, t + 1] + 1) % 37
    if family == "encoder_decoder":
        a = model(src, decoder_input_ids=dec).logits
        b = model(src, decoder_input_ids=changed).logits
    else:
        a, b = model(dec).logits, model(changed).logits
    assert torch.allclose(a[:, : t + 1], b[:, : t + 1], atol=ATOL)
    assert not torch.allclose(a[:, t + 1], b[:, t + 1], atol=ATOL)


def assert_padding_invariance(model, family):
    """Appending pad tokens with mask 0 leaves the real positions' outputs unchanged."""
    ids = torch.randint(1, 37, (2, 7))
    padded = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(2, 7), torch.zeros(2, 3)], dim=1).long()
    if family == "encoder_decoder":
        dec = torch.randint(1, 37, (2, 5))
        ref = model(ids, decoder_input_ids=dec).logits
        # pads on the source side, then on the target side too
        src_padded = model(padded, attention_mask=mask, decoder_input_ids=dec).logits
        assert torch.allclose(ref, src_padded, atol=ATOL)
        dec_padded = torch.cat([dec, torch.zeros(2, 2, dtype=torch.long)], dim=1)
        dec_mask = torch.cat([torch.ones(2, 5), torch.zeros(2, 2)], dim=1).long()
        both = model(padded, attention_mask=mask, decoder_input_ids=dec_padded, decoder_attention_mask=dec_mask).logits
        assert torch.allclose(ref, both[:, :5], atol=ATOL)
    else:
        ref = model(ids).logits
        out = model(padded, attention_mask=mask).logits
        assert torch.allclose(ref, out[:, :7], atol=ATOL)


def assert_cached_decoding_equals_full_forward(model, family):
    """A prefix, then one token at a time through the KV cache, gives the full pass's logits."""
    src = torch.randint(0, 37, (2, 6))
    dec = torch.randint(0, 37, (2, 9))
    if family == "encoder_decoder":
        memory = model.encode(src)
        full = model(decoder_input_ids=dec, encoder_hidden_states=memory).logits

        def step(ids, cache):
            return model(decoder_input_ids=ids, encoder_hidden_states=memory, cache=cache, use_cache=True)
    else:
        full = model(dec).logits

        def step(ids, cache):
            return model(ids, cache=cache, use_cache=True)

    out = step(dec[:, :3], None)
    pieces, cache = [out.logits], out.cache
    for t in range(3, 9):
        out = step(dec[:, t : t + 1], cache)
        pieces.append(out.logits)
    assert cache.length == 9
    assert torch.allclose(torch.cat(pieces, dim=1), full, atol=ATOL)


def assert_left_padded_batch_matches_unpadded_rows(model):
    """Batched prompts of different lengths: a left-padded row gets the same logits (and the
    same cached continuation) as the row alone, because positions count only real tokens."""
    short = torch.randint(1, 37, (1, 4))
    long = torch.randint(1, 37, (1, 7))
    batch = torch.cat([torch.cat([torch.zeros(1, 3, dtype=torch.long), short], 1), long])
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [1] * 7])
    out = model(batch, attention_mask=mask, use_cache=True)
    alone = model(short).logits
    assert torch.allclose(out.logits[0, 3:], alone[0], atol=ATOL)
    assert torch.allclose(out.logits[1], model(long).logits[0], atol=ATOL)
    nxt = torch.randint(1, 37, (2, 1))
    mask2 = torch.cat([mask, torch.ones(2, 1, dtype=torch.long)], 1)
    step = model(nxt, attention_mask=mask2, cache=out.cache, use_cache=True).logits
    ref = model(torch.cat([short, nxt[:1]], 1)).logits[0, -1]
    assert torch.allclose(step[0, -1], ref, atol=ATOL)


def assert_independent_layers(model, family):
    """The first two layers of a stack start with different weights (no shared initial tensor)."""
    stack = model.decoder if family != "encoder_only" else model.encoder
    first, second = (dict(layer.named_parameters()) for layer in stack.layers[:2])
    matrices = [name for name, w in first.items() if w.dim() == 2]
    assert matrices and first.keys() == second.keys()
    assert all(not torch.equal(first[name], second[name]) for name in matrices), matrices


def assert_tied_and_untied(family, position, **kinds):
    """Tied, the output projection is the embedding; untied, a (V, D) matrix of its own."""
    tied = build(family, position, tie_embeddings=True, **kinds)
    untied = build(family, position, tie_embeddings=False, **kinds)
    assert tied.lm_head.weight is tied.embed.weight
    assert untied.lm_head.weight is not untied.embed.weight
    extra = sum(p.numel() for p in untied.parameters()) - sum(p.numel() for p in tied.parameters())
    assert extra == 37 * 16


def test_embedding_norm_normalizes_before_the_first_layer():
    model = build("encoder_only", "learned", norm="post", embed_norm=True)
    assert isinstance(model.encoder.embed_norm, torch.nn.LayerNorm)
    captured = {}
    model.encoder.layers[0].register_forward_pre_hook(lambda m, args: captured.setdefault("x", args[0]))
    model(torch.randint(0, 37, (2, 5)))
    x = captured["x"]
    assert torch.allclose(x.mean(-1), torch.zeros(2, 5), atol=1e-5)
    assert torch.allclose(x.var(-1, unbiased=False), torch.ones(2, 5), atol=0.05)  # eps vs small init
