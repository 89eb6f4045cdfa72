"""zoo-bench measure=decode (zoo.bench.decode): its options refused on one line, the cache bytes
it reports counted in the cache object and equal to zoo.models.limits' torch-free count for every
mixer and pattern, the recurrent layers' share flat in the context, and the decoding it measures
the one zoo.models.generate does. No timing is asserted."""

from __future__ import annotations

import json

import pytest
import torch

import zoo
from zoo.bench.decode import cache_bytes, cached_decoding, decode_by_context
from zoo.bench.options import BenchOptions, parse_contexts
from zoo.config.schema.convert import as_model_config
from zoo.models.generate import generate
from zoo.models.limits import kv_cache_bytes

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.vocab_size=64", "model.max_seq_len=64"]
HYBRID = ["model=gdn_hybrid", "model.attention=full", "model.global_every=null"]
ARMS = {
    "full": ["model=llama"],
    "sliding": ["model=llama", "model.attention=sliding", "model.window=4"],
    "gdn 1:1": [*HYBRID, "model.layer_pattern=[gated_deltanet,full]"],
    "gdn all": [*HYBRID, "model.layer_pattern=[gated_deltanet]"],
    "mamba2 1:1": [*HYBRID, "model.layer_pattern=[mamba2,full]"],
    "mamba2 all": [*HYBRID, "model.layer_pattern=[mamba2]"],
}


def tiny_model(argv: list[str]):
    torch.manual_seed(0)
    return zoo.build_model(as_model_config(zoo.compose([*argv, *TINY, "model.dropout=0.0"]).model)).eval()


def bench_main(argv: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of zoo-bench's main() in this process, torch's thread count
    put back after it (zoo-bench sets threads=)."""
    from tests.conftest import run_main
    from zoo.cli import bench

    threads = torch.get_num_threads()
    try:
        return run_main(bench.main, ["zoo-bench", *argv], capsys, monkeypatch)
    finally:
        torch.set_num_threads(threads)


def test_contexts_parse_in_the_order_given():
    assert parse_contexts("256, 1024,2048") == [256, 1024, 2048]
    assert parse_contexts("64") == [64]
    assert BenchOptions(contexts="8,4", measure="decode").context_list == [8, 4]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["contexts=0,8"], "contexts='0,8': give prompt lengths >= 1, comma-separated (e.g. 256,1024,2048)"),
        (["contexts=long"], "contexts='long': give prompt lengths >= 1, comma-separated (e.g. 256,1024,2048)"),
        (["contexts=8,8"], "contexts='8,8' names a length twice"),
        (["new_tokens=1"], "measure=decode times the steps after the first new token: new_tokens must be >= 2, got 1"),
        (["model=bert"], "measure=decode times a decoder-only model continuing prompts; model.family=encoder_only"),
        (["measure=decode,turbo"], "measure='decode,turbo': choose from train, forward, generate, fit, memory, decode"),
    ],
)
def test_zoo_bench_decode_refuses_bad_options_in_one_line(argv, message, capsys, monkeypatch):
    status, _, err = bench_main(["measure=decode", *TINY, "seq_len=16", "rounds=1", *argv], capsys, monkeypatch)
    assert status == 2, err[-2000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zoo-bench: error: ") and message in lines[0], lines


@pytest.mark.parametrize("arm", list(ARMS))
def test_the_cache_measured_is_generates_and_its_bytes_are_the_limits_count(arm):
    """Step-by-step decoding gives generate's tokens, and its cache holds exactly the bytes
    `kv_cache_bytes` counts: the keys and values of prompt + new - 1 positions and each recurrent
    layer's state. A sliding layer's growing cache keeps window - 1 positions between steps (the
    count is the window a step attends, what a static cache allocates): one position less."""
    model = tiny_model(ARMS[arm])
    prompt = torch.randint(8, 64, (2, 9), generator=torch.Generator().manual_seed(0))
    tokens, cache = cached_decoding(model, prompt, 5)
    assert torch.equal(tokens, generate(model, prompt, max_new_tokens=5))
    assert cache.length == 9 + 5 - 1
    one_position = 2 * 2 * 2 * 16 * 4  # 2 layers, K and V, 2 heads of 16, float32
    between_steps = 2 * one_position if arm == "sliding" else 0  # 2 rows
    assert cache_bytes(cache) == kv_cache_bytes(model.config, 2, 9, 5, itemsize=4) - between_steps > 0


def test_decode_by_context_reports_every_model_at_every_context_and_the_state_stays_flat():
    models = {name: tiny_model(ARMS[name]) for name in ("full", "gdn all", "mamba2 1:1")}
    figures = decode_by_context(models, contexts=[4, 20], new_tokens=3, rounds=1, log=lambda _: None)
    assert set(figures) == set(models)
    for name, by_context in figures.items():
        assert [d["context"] for d in by_context] == [4, 20]
        for d in by_context:
            assert d["cache_bytes"] == d["cache_bytes_counted"] > 0, (name, d)
            assert d["decode_tokens_per_s"] > 0 and d["prefill_ms"] > 0 and d["memory_growth_bytes"] >= 0
            assert d["memory_kind"] == "peak RSS growth"
    short, long = (d["cache_bytes"] for d in figures["full"])
    assert long - short == 16 * 2 * 2 * 2 * 16 * 4  # 16 more positions: 2 layers, K and V, 2 heads of 16, float32
    assert figures["gdn all"][0]["cache_bytes"] == figures["gdn all"][1]["cache_bytes"]  # a fixed-size state
    hybrid_short, hybrid_long = (d["cache_bytes"] for d in figures["mamba2 1:1"])
    assert hybrid_long - hybrid_short == (long - short) // 2  # one attention layer of two grows


def test_zoo_bench_measure_decode_writes_the_figures_and_their_table(tmp_path, capsys, monkeypatch):
    out = tmp_path / "bench.json"
    argv = [*HYBRID, "model.layer_pattern=[gated_deltanet,full]", *TINY, "peers=none", "variants=eager,bf16"]
    argv += ["seq_len=16", "measure=decode", "contexts=6,12", "new_tokens=3", "rounds=1", "threads=1", f"out={out}"]
    status, stdout, err = bench_main(argv, capsys, monkeypatch)
    assert status == 0, err[-2000:]
    assert "zoo bf16 not measured (float32 variants only: eager, compile)" in err
    result = json.loads(out.read_text())
    assert result["workload"]["contexts"] == [6, 12]
    rows = {r["variant"]: r for r in result["rows"]}
    assert "decode" not in rows["bf16"]
    decode = rows["eager"]["decode"]
    assert [d["context"] for d in decode] == [6, 12]
    assert all(d["cache_bytes"] == d["cache_bytes_counted"] for d in decode)
    assert "| zoo | eager | 12 |" in stdout and "| context | decode tokens/s |" in stdout
    assert "| system | variant |  |" not in stdout  # no empty table of the other measures
