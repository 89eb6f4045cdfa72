"""What decoding will need is known before it starts: lengths past a bounded scheme's positions
are refused in these words (for every causal family and scheme: tests/models/test_decoding_rows.py);
the key/value cache's size (checked against the bytes a real static cache
allocates) is refused when it exceeds free memory; and a continuation keeps the space a subword
piece carries at its start."""

from __future__ import annotations

import pytest
import torch

import zoo
from tests.conftest import CAUSAL_FAMILIES, tiny
from zoo.config import ConfigError, ModelConfig
from zoo.data.prompts import continue_text
from zoo.data.tokenizers import build_tokenizer
from zoo.models.generate import GenerationConfig, generate
from zoo.models.limits import check_lengths, check_memory, kv_cache_bytes
from zoo.nn import cache as cache_module


def test_the_length_refusals_keep_their_wording():
    decoder = ModelConfig(**tiny("decoder_only", "learned", max_seq_len=16))
    with pytest.raises(
        ConfigError,
        match=r"^prompt \(10 tokens\) \+ max_new_tokens \(7\) = 17 is past the "
        r"learned positions \(model.max_seq_len=16\): max_new_tokens=6 is the most for "
        r"this prompt$",
    ):
        check_lengths(decoder, 10, 7)
    seq2seq = ModelConfig(**tiny("encoder_decoder", "learned", max_seq_len=16))
    with pytest.raises(
        ConfigError,
        match=r"^the source \(17 tokens\) is longer than the learned positions "
        r"\(model.max_seq_len=16\): shorten it to 16 tokens at most$",
    ):
        check_lengths(seq2seq, 17, 1)
    with pytest.raises(
        ConfigError,
        match=r"^max_new_tokens \(16\) \+ BOS is past the learned positions "
        r"\(model.max_seq_len=16\): max_new_tokens=15 is the most$",
    ):
        check_lengths(seq2seq, 4, 16)


ATTENTIONS = {
    "full": {},
    "sliding": {"attention": "sliding", "window": 3, "global_every": 2},
    "gated_deltanet": {"attention": "gated_deltanet", "global_every": 2},  # a decoder-only layer
    "mamba2": {"attention": "mamba2", "global_every": 2, "ssm_head_dim": 8, "ssm_state": 8, "ssm_chunk": 4},
}


@pytest.mark.parametrize(
    "family, attention",
    [
        (f, a)
        for f in CAUSAL_FAMILIES
        for name, a in ATTENTIONS.items()
        if name not in ("gated_deltanet", "mamba2") or f == "decoder_only"
    ],
    ids=lambda v: v if isinstance(v, str) else next((k for k, a in ATTENTIONS.items() if a == v), "?"),
)
def test_kv_cache_bytes_equal_what_the_static_cache_allocates(family, attention, monkeypatch):
    """A recurrent layer's state (Gated DeltaNet's, Mamba 2's) is counted in place of its keys and values."""
    model = zoo.build_model(tiny(family, "rope", max_seq_len=64, n_heads=4, n_kv_heads=2, **attention)).eval()
    made = []
    original = cache_module.Cache.empty.__func__

    def recording(cls, n_layers, capacity=None, windows=None, recurrent=None):
        made.append(original(cls, n_layers, capacity, windows, recurrent))
        return made[-1]

    monkeypatch.setattr(cache_module.Cache, "empty", classmethod(recording))
    B, T, new = 3, 7, 5
    ids = torch.randint(6, 30, (B, T))
    generate(model, ids, config=GenerationConfig(max_new_tokens=new, static_cache=True), bos_id=2, eos_id=None)
    (cache,) = made
    allocated = 0
    for layer in cache.layers:
        if layer.state is not None:  # a recurrent layer: its state, no keys
            allocated += layer.state.nbytes()
            continue
        allocated += layer.self_attn.k.nbytes + layer.self_attn.v.nbytes
        if layer.cross_kv is not None:
            allocated += sum(t.nbytes for t in layer.cross_kv)
    cfg = model.config
    assert allocated == kv_cache_bytes(cfg, B, T, new, itemsize=4) > 0


def test_a_cache_larger_than_free_memory_is_refused_before_decoding():
    cfg = zoo.build_model(tiny("decoder_only", "rope", max_seq_len=64)).config
    check_memory(cfg, 1, 8, 100, device=torch.device("cpu"), itemsize=4)  # kilobytes: fine
    with pytest.raises(ConfigError, match=r"max_new_tokens=1000000000000 .* key/value cache, more than the .* free"):
        check_memory(cfg, 1, 8, 10**12, device=torch.device("cpu"), itemsize=4)


@pytest.mark.parametrize("kind", ["sentencepiece_bpe", "sentencepiece_unigram"])
def test_a_continuation_keeps_the_space_its_first_piece_carries(kind, tmp_path):
    text = "In the beginning God created the heaven and the earth. " * 40
    tok = build_tokenizer({"kind": kind, "vocab_size": 60, "cache_dir": str(tmp_path)}, [text])
    prompt, rest = "In the beginning", " God created the heaven"
    new_ids = tok.encode(prompt + rest)[len(tok.encode(prompt)) :]
    assert tok.encode(prompt) + new_ids == tok.encode(prompt + rest)  # the cut falls between pieces
    assert prompt + tok.decode(new_ids) != prompt + rest  # decoded alone, the space is lost
    assert continue_text(tok, prompt, new_ids) == prompt + rest
