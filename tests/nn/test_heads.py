"""The attention sink (`model.attn_sink`) and output gate (`model.attn_gate`) against their
equations written out here: the sink as gpt-oss's eager attention computes it (the softmax over
[scores, s_h], the sink's column dropped) and off-by-one as exp(a_i) / (1 + Σ exp(a_j)), on SDPA's
path and the math path, with masks, a sliding band, a position bias and grouped key/value heads;
the gate as Qiu et al. 2025 write it, Y' = Y ⊙ sigmoid(X W_θ), per head or per head dimension;
and decoding through a KV cache (growing and static, sliding layers) equal to the whole forward."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

import zoo
from tests.conftest import tiny
from zoo.config import ConfigError, ModelConfig
from zoo.config.facts.heads import GATE_FACTS, SINK_FACTS, AttnGate, AttnSink
from zoo.nn.attention import Attention, attention
from zoo.nn.position.base import PositionScheme

B, H, HKV, T, S, DH = 2, 4, 2, 5, 7, 8


def _reference(q, k, v, sink, keep, bias):
    """gpt-oss's eager attention: scores, + bias, masked, the sink column, softmax, drop it."""
    k = k.repeat_interleave(H // HKV, dim=1)  # (B, H, S, Dh)
    v = v.repeat_interleave(H // HKV, dim=1)
    scores = q @ k.transpose(-2, -1) / DH**0.5 + bias  # (B, H, T, S)
    scores = scores.masked_fill(~keep, float("-inf"))
    column = sink.view(1, H, 1, 1).expand(B, H, T, 1)
    probs = torch.softmax(torch.cat([scores, column], dim=-1), dim=-1)[..., :-1]  # (B, H, T, S)
    return probs @ v, probs


def _masks():
    causal = torch.ones(T, S, dtype=torch.bool).tril(S - T)  # the T queries are the last T keys
    band = causal & ~torch.ones(T, S, dtype=torch.bool).tril(S - T - 3)  # a window of 3
    padded = causal.expand(B, 1, T, S).clone()
    padded[1, :, :, :2] = False  # row 1 left-padded by 2
    return {"causal": causal[None, None], "band": band[None, None], "padded": padded}


@pytest.mark.parametrize("math_path", [False, True], ids=["sdpa", "math"])
@pytest.mark.parametrize("mask", ["causal", "band", "padded"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no_bias", "bias"])
def test_a_sink_joins_each_heads_softmax_denominator_as_gpt_oss_computes_it(math_path, mask, with_bias):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, n, L, DH, generator=g) for n, L in ((H, T), (HKV, S), (HKV, S)))
    sink = torch.randn(H, generator=g)
    bias = torch.randn(1, H, T, S, generator=g) if with_bias else torch.zeros(1, H, T, S)
    keep = _masks()[mask]
    out, weights = attention(
        q, k, v, mask=keep, bias=bias if with_bias else None, math_path=math_path, sink=sink
    )  # (B, H, T, Dh)
    expected, probs = _reference(q, k, v, sink, keep, bias)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    if math_path:  # the weights as applied, without the sink's column
        torch.testing.assert_close(weights, probs, rtol=1e-5, atol=1e-6)
    assert (probs.sum(-1) < 1).all()  # the sink takes a share of every query's weight


@pytest.mark.parametrize("math_path", [False, True], ids=["sdpa", "math"])
def test_off_by_one_is_exp_over_one_plus_the_sum(math_path):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 3, DH, generator=g) for _ in range(3))
    layer = Attention(
        d_model=8, n_heads=2, n_kv_heads=2, head_dim=DH, bias=False, dropout=0.0, sink=AttnSink.off_by_one
    )
    assert layer.sink is not None and not list(layer.sink.parameters())
    out, _ = attention(q, k, v, causal=True, math_path=math_path, sink=layer.sink(q))
    scores = (q @ k.transpose(-2, -1) / DH**0.5).masked_fill(~torch.ones(3, 3, dtype=torch.bool).tril(), float("-inf"))
    weights = scores.exp() / (1 + scores.exp().sum(-1, keepdim=True))  # Miller 2023
    torch.testing.assert_close(out, weights @ v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", [AttnGate.headwise, AttnGate.elementwise], ids=str)
def test_the_gate_multiplies_each_heads_output_by_sigmoid_of_x_w(kind):
    """Qiu et al. 2025, eq. (G1 after SDPA): Y' = Y ⊙ sigmoid(X W_θ), then W_o."""
    torch.manual_seed(2)
    D = 16
    layer = Attention(d_model=D, n_heads=H, n_kv_heads=HKV, head_dim=DH, bias=True, dropout=0.0, gate=kind)
    x = torch.randn(B, T, D)
    positions = torch.arange(T).expand(B, T)
    got = layer(x, positions=positions, position=PositionScheme(), mask=None, causal=True)
    q, k, v = layer.qkv_proj(x).split([H * DH, HKV * DH, HKV * DH], dim=-1)
    heads = [t.view(B, T, n, DH).transpose(1, 2) for t, n in ((q, H), (k, HKV), (v, HKV))]
    y, _ = attention(*heads, causal=True)  # (B, H, T, Dh)
    y = y.transpose(1, 2)  # (B, T, H, Dh)
    w = layer.gate.proj.weight  # (H or H·Dh, D)
    assert w.shape == (GATE_FACTS[kind].width(ModelConfig(n_heads=H, d_model=32)), D)
    gate = torch.sigmoid(x @ w.T + layer.gate.proj.bias).view(B, T, H, -1)  # (B, T, H, 1 or Dh)
    expected = layer.o_proj((y * gate).reshape(B, T, H * DH))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def _decode(model, family, ids, cache, prompt):
    """The logits of the whole sequence, or of a prompt then one token at a time through `cache`."""
    memory = model.encode(ids[:, :6]) if family == "encoder_decoder" else None

    def run(tokens):
        if memory is not None:
            return model(
                decoder_input_ids=tokens, encoder_hidden_states=memory, cache=cache, use_cache=cache is not None
            )
        return model(tokens, cache=cache, use_cache=cache is not None)

    if cache is None:
        return run(ids).logits
    outs = [run(ids[:, :prompt]).logits] + [run(ids[:, t : t + 1]).logits for t in range(prompt, ids.shape[1])]
    return torch.cat(outs, dim=1)


@pytest.mark.parametrize(
    "family, position, sink, gate, cache",
    [
        ("decoder_only", "rope", "learned", "elementwise", "growing"),
        ("decoder_only", "alibi", "off_by_one", "headwise", "static"),
        ("decoder_only", "learned", "learned", "none", "static"),
        ("encoder_decoder", "relative", "learned", "headwise", "growing"),
    ],
)
def test_cached_decoding_with_a_sink_and_a_gate_is_the_whole_forward(family, position, sink, gate, cache):
    """Past a sliding window of 3, with a global layer between sliding ones."""
    T = 11
    model = zoo.build_model(
        tiny(
            family,
            position,
            n_layers=3,
            **({"n_decoder_layers": 3} if family == "encoder_decoder" else {}),
            attention="sliding",
            window=3,
            global_every=2,
            max_seq_len=40,
            attn_sink=sink,
            attn_gate=gate,
            init_std=0.3,
        )
    ).eval()
    ids = torch.randint(4, 37, (2, T))
    with torch.no_grad():
        reference = _decode(model, family, ids, None, 0)
        got = _decode(model, family, ids, model.new_cache(capacity=T if cache == "static" else None), prompt=4)
    torch.testing.assert_close(got, reference, atol=1e-5, rtol=1e-4)


def test_the_rows_count_the_built_parameters_and_the_sink_learns():
    cfg = ModelConfig(**tiny(attn_sink="learned", attn_gate="elementwise", bias=False))
    model = zoo.build_model(cfg)
    sinks = [p for n, p in model.named_parameters() if n.endswith("sink.logits")]
    gates = [p for n, p in model.named_parameters() if ".gate.proj." in n]
    assert len(sinks) == cfg.n_layers and sum(p.numel() for p in sinks) == cfg.n_layers * SINK_FACTS[
        cfg.attn_sink
    ].parameters(cfg)
    assert sum(p.numel() for p in gates) == cfg.n_layers * cfg.d_model * cfg.n_heads * cfg.head_dim
    model(torch.randint(0, 37, (1, 6))).logits.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in sinks)


def test_an_unknown_sink_or_gate_is_refused_on_one_line_naming_the_kinds():
    for key, kinds in (("attn_sink", AttnSink), ("attn_gate", AttnGate)):
        with pytest.raises(ConfigError) as refused:
            ModelConfig(**tiny(**{key: "sideways"}))
        assert "\n" not in str(refused.value) and all(k.value in str(refused.value) for k in kinds)


@pytest.mark.parametrize("kernel", ["sdpa", "flex"])
def test_packed_documents_with_a_sink_each_get_their_own_logits(kernel):
    """A sink under document masking (FlexAttention's kernel asked for: the sink takes the
    dense path) gives each packed document the logits it has alone."""
    torch.manual_seed(0)
    model = zoo.build_model(tiny(position="rope", attn_sink="learned", attn_gate="headwise", init_std=0.3)).eval()
    model.decoder.document_kernel = kernel
    docs = [torch.randint(4, 37, (n,)) for n in (5, 3, 6)]
    ids = torch.cat(docs)[None]  # (1, T)
    document_ids = torch.cat([torch.full((len(d),), i) for i, d in enumerate(docs)])[None]  # (1, T)
    with torch.no_grad():
        packed = model(ids, document_ids=document_ids).logits[0]  # (T, V)
        alone = torch.cat([model(d[None]).logits[0] for d in docs])  # (T, V)
    torch.testing.assert_close(packed, alone, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("key, kinds", [("attn_sink", AttnSink), ("attn_gate", AttnGate)])
def test_each_kind_has_a_config_file_that_composes_it(key, kinds):
    conf = Path(zoo.__file__).resolve().parents[1] / "conf" / "model" / key
    assert {p.stem for p in conf.glob("*.yaml")} == {k.value for k in kinds}
    for kind in kinds:
        assert yaml.safe_load((conf / f"{kind.value}.yaml").read_text()) == {"model": {key: kind.value}}
        assert getattr(zoo.compose(["model=llama", f"model/{key}={kind.value}"]).model, key) == kind.value
