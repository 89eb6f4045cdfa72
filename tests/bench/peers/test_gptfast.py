"""The gpt-fast-style decoding peer (zoo/bench/peers/gptfast.py) computes zoo's function: with
zoo's weights its logits are zoo's and its greedy tokens, through its static cache and at any
batch size in turn, are zoo-generate's; its compiled step is one graph; what it has no
equivalent of is refused by name."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

import zoo
from tests.conftest import tiny
from zoo.bench.peers import PeerUnavailable
from zoo.bench.peers.gptfast import check
from zoo.bench.subjects import build_subject
from zoo.bench.workload import Workload
from zoo.config import ModelConfig
from zoo.config.schema.convert import as_model_config

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=4", "model.vocab_size=97", "model.max_seq_len=64"]
# GPT-2 (learned positions, LayerNorm, GELU, biases, tied), Llama (RoPE, RMSNorm, SwiGLU, GQA, no
# biases; and with RoPE's linear scaling), and the plain two-matrix MLP with no positions
SHAPES = {
    "gpt": ["model=gpt"],
    "llama": ["model=llama", "model.n_kv_heads=2"],
    "rope-linear": ["model=llama", "model.position.scale=4.0"],
    "plain": ["model=gpt", "model.position.kind=none", "model.activation=relu", "model.bias=false"],
}


def workload(shape: str) -> Workload:
    cfg = as_model_config(zoo.compose([*SHAPES[shape], "model.dropout=0.0", *TINY]).model)
    return Workload(model=cfg, batch=2, seq_len=16, device=torch.device("cpu"))


def sharp(work: Workload, compile: bool = False):
    """zoo's model with weights drawn 25 × wider (init_std 0.5, as tests/conftest.py's `sharp`:
    next tokens far from ties, so a row or position mix-up changes an argmax) and the peer built
    from them."""
    work = dataclasses.replace(work, model=dataclasses.replace(work.model, init_std=0.5))
    torch.manual_seed(0)
    ours = build_subject("zoo", work)
    return ours, build_subject("gpt-fast", work, zoo=ours, compile=compile)


@pytest.mark.parametrize("shape", SHAPES)
def test_the_peer_has_zoos_logits_and_greedy_tokens(shape):
    work = workload(shape)
    ours, peer = sharp(work)
    ids = work.prompt(3, 12)
    with torch.no_grad():
        torch.testing.assert_close(peer.model(ids), ours.model(ids).logits, rtol=1e-5, atol=1e-5)
    for rows in (3, 1, 3):  # one cache per batch size, reused
        assert torch.equal(peer.generate(ids[:rows], 9), ours.generate(ids[:rows], 9))
    peer.train_step(work.training_batch())


def test_its_cache_is_written_in_place_at_the_steps_positions():
    work = workload("llama")
    _, peer = sharp(work)
    peer.generate(work.prompt(1, 5), 4)  # 5 + 3 positions written; the last new token is not fed
    cache = peer.decoder.layers[0].attention.kv_cache
    assert cache.k_cache.shape == (1, 2, 9, 8)  # (B, Hkv, S, Dh): S = prompt + new tokens
    assert cache.k_cache[:, :, :8].abs().sum(-1).min() > 0 and cache.k_cache[:, :, 8].abs().sum() == 0


@pytest.mark.parametrize(
    "overrides, named",
    [
        ({"norm": "post"}, "model.norm=post"),
        ({"position": "alibi"}, "model.position.kind=alibi"),
        ({"qk_norm": "head"}, "model.qk_norm=head"),
        ({"scale_embeddings": True}, "model.scale_embeddings=True"),
        ({"family": "encoder_only"}, "decoder-only"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_what_it_has_no_equivalent_of_is_refused_by_name(overrides, named):
    with pytest.raises(PeerUnavailable, match=re.escape(named)):
        check(ModelConfig(**tiny(**overrides)))


@pytest.mark.slow
def test_its_compiled_step_is_one_graph_and_decodes_zoos_tokens():
    """The decoding step compiled as gpt-fast compiles it (`fullgraph=True`: a graph break is an
    error); after the first call of each batch size nothing recompiles."""
    from torch._dynamo.utils import counters

    work = workload("llama")
    ours, peer = sharp(work, compile=True)
    ids = work.prompt(2, 10)
    counters.clear()
    for rows in (1, 2, 1, 2):
        assert torch.equal(peer.generate(ids[:rows], 8), ours.generate(ids[:rows], 8))
    assert sum(counters["graph_break"].values()) == 0
    assert counters["stats"]["unique_graphs"] <= 2  # one per batch size
