"""zoo-bench end to end on a tiny model (figures are not checked, only that every system was
measured the same way), and the peers' models: same function (Hugging Face, same weights) or
same shapes (x-transformers)."""

from __future__ import annotations

import json

import pytest
import torch

import zoo
from zoo.bench.peers import PeerUnavailable
from zoo.bench.subjects import build_subject, workload_from_spec
from zoo.bench.workload import Workload
from zoo.config.schema.convert import as_model_config

TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.vocab_size=128", "model.max_seq_len=64"]


def workload(preset: str, **kw) -> Workload:
    cfg = as_model_config(zoo.compose([f"model={preset}", "model.dropout=0.0", *TINY]).model)
    return Workload(model=cfg, batch=2, seq_len=16, device=torch.device("cpu"), **kw)


def bench_main(argv: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of zoo-bench's main() run in this process; torch's thread
    count, which zoo-bench sets (threads=, default 2), is put back after it."""
    from tests.conftest import run_main
    from zoo.cli import bench

    threads = torch.get_num_threads()
    try:
        return run_main(bench.main, ["zoo-bench", *argv], capsys, monkeypatch)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
def test_zoo_bench_cli_measures_every_system_and_writes_json_and_markdown(tmp_path, capsys, monkeypatch):
    """zoo-bench's main() in this process: every system and variant timed the same way. The
    memory figures come from fresh processes of their own, each the interpreter's start and the
    imports of every peer; they are asked of zoo's two variants whose ratio the report gives
    (the test below runs the measurement those processes run, for every system in this one)."""
    out = tmp_path / "bench.json"
    common = [*TINY, "batch=2", "seq_len=16", "rounds=2", "steps=1", "threads=1"]
    # one thread, as every process of the suite runs (tests/conftest.py): the other worker's
    # processes share the cores
    status, _, err = bench_main(
        [
            *common,
            "prompt=4",
            "new_tokens=6",
            "gen_batch=3",
            "variants=eager,bf16,checkpoint",
            "peers=hf,x-transformers,gpt-fast",
            "measure=train,forward,generate,fit",
            f"out={out}",
        ],
        capsys,
        monkeypatch,
    )
    assert status == 0, err[-2000:]
    result = json.loads(out.read_text())
    rows = {(r["system"], r["variant"]): r for r in result["rows"]}
    assert set(rows) == {(s, v) for s in ("zoo", "hf", "x-transformers", "gpt-fast") for v in ("eager", "bf16")} | {
        ("zoo", "checkpoint")
    }
    for (_system, variant), row in rows.items():
        assert row["train_tokens_per_s"] > 0 and 0 < row["mfu"] and "memory_mb" not in row, row
        if variant != "checkpoint":
            assert row["forward_ms"] > 0 and row["generate_tokens_per_s_batch1"] > 0
            assert row["generate_tokens_per_s_batch3"] > 0
            share = row["generate_tokens_per_s_batch1"] * row["weight_bytes"] / result["memory_bytes_per_s"]
            assert row["generate_bandwidth_share"] == pytest.approx(share)
    # float32 weights read as 4 bytes, as bf16 ones in the bf16 variants; the peer holds zoo's weights
    assert rows[("zoo", "eager")]["weight_bytes"] == 2 * rows[("zoo", "bf16")]["weight_bytes"]
    assert rows[("gpt-fast", "bf16")]["weight_bytes"] == rows[("zoo", "bf16")]["weight_bytes"]
    assert rows[("zoo", "eager")]["fit_tokens_per_s"] > 0 and rows[("zoo", "bf16")]["fit_tokens_per_s"] > 0
    assert result["workload"]["tokens_per_step"] == 32
    assert set(result["matmul_flops_per_s"]) == {"float32", "bfloat16"}
    for name in (
        "train eager: zoo / fastest peer",
        "train bf16: zoo bf16 / zoo float32",
        "fit / bare step (eager)",
        "generate batch 1: zoo / hf",
    ):
        assert result["ratios"][name] > 0, name
    assert "memory: checkpoint / eager" not in result["ratios"]  # not measured, not made up
    table = out.with_suffix(".md").read_text()
    assert "| zoo | eager |" in table and "x-transformers" in table and "fit / bare step" in table

    memory = tmp_path / "memory.json"
    argv = [*common, "variants=eager,checkpoint", "peers=none", "measure=memory", "memory_rounds=1", f"out={memory}"]
    status, _, err = bench_main(argv, capsys, monkeypatch)
    assert status == 0, err[-2000:]
    result = json.loads(memory.read_text())
    rows = {(r["system"], r["variant"]): r for r in result["rows"]}
    assert set(rows) == {("zoo", "eager"), ("zoo", "checkpoint")}
    for row in rows.values():
        assert row["memory_mb"] >= 0 and len(row["memory_mb_rounds"]) == 1, row
        assert row["memory_kind"] == "peak RSS" and row["memory_seq_len"] == 16
    assert result["ratios"]["memory: checkpoint / eager"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("system", ["zoo", "hf", "x-transformers", "gpt-fast"])
def test_each_systems_training_memory_is_measured_as_a_fresh_process_measures_it(system):
    """`zoo.bench.memory.measure`, what each of zoo-bench's fresh processes runs, here for every
    system in float32 and bf16: the system named, the peak RSS above what the process held before
    the two training steps."""
    from zoo.bench.memory import measure
    from zoo.cli.bench import configure

    model, _, _ = configure([*TINY, "model.dropout=0.0"])
    threads = torch.get_num_threads()
    try:
        for bf16 in (False, True):
            spec = dict(model=model.to_dict(), batch=2, seq_len=16, device="cpu", bf16=bf16, system=system, threads=1)
            got = measure(spec)
            assert got["kind"] == "peak RSS" and got["peak_bytes"] > 0 and got["before_bytes"] > 0, got
            assert got["training_bytes"] == max(got["peak_bytes"] - got["before_bytes"], 0)
            assert got["system"] == build_subject(system, workload_from_spec(spec)).name
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["variants=eager,turbo"],
            "variants='eager,turbo': choose from eager, compile, bf16, bf16-compile, checkpoint",
        ),
        (["peers=fairseq"], "peers='fairseq': choose from hf, x-transformers, litgpt, gpt-fast (or none)"),
        (["shape=gpt3"], "shape='gpt3': choose from reference, gpt2-small, llama-250m"),
        (["trainer.max_steps=3"], "zoo-bench takes model overrides"),
        (
            ["seq_len=512"],
            "seq_len=512 is longer than model.max_seq_len=256: lower seq_len or raise model.max_seq_len=512",
        ),
    ],
)
def test_zoo_bench_refuses_bad_options_in_one_line(argv, message, capsys, monkeypatch):
    status, _, err = bench_main([*argv, "measure=forward", "rounds=1"], capsys, monkeypatch)
    assert status == 2
    assert err.strip().splitlines() == [f"zoo-bench: error: {message}"] or message in err.strip().splitlines()[-1]


@pytest.mark.parametrize("preset", ["gpt", "llama", "bert", "t5"])
def test_the_hugging_face_peer_computes_the_same_function(preset):
    work = workload(preset)
    torch.manual_seed(0)
    zoo_subject = build_subject("zoo", work)
    hf = build_subject("hf", work, zoo=zoo_subject)
    batch = work.training_batch()
    extra = {"decoder_input_ids": batch["decoder_input_ids"]} if "decoder_input_ids" in batch else {}
    with torch.no_grad():
        ours = zoo_subject.model.eval()(batch["input_ids"], attention_mask=batch["attention_mask"], **extra).logits
        theirs = hf.model.eval()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], **extra).logits
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)
    if preset in ("gpt", "llama"):
        prompt = work.prompt(2, 5)
        assert torch.equal(zoo_subject.generate(prompt, 7), hf.generate(prompt, 7))  # same greedy tokens


@pytest.mark.parametrize("preset", ["gpt", "llama"])
def test_x_transformers_peer_has_the_same_shapes(preset):
    work = workload(preset)
    zoo_subject = build_subject("zoo", work)
    xt = build_subject("x-transformers", work, zoo=zoo_subject)
    ours = sum(p.numel() for p in zoo_subject.model.parameters())
    theirs = sum(p.numel() for p in xt.model.parameters())
    assert abs(theirs - ours) / ours < 0.03, (ours, theirs)  # biases and norm details differ, not widths
    out = xt.generate(work.prompt(2, 5), 7)
    assert out.shape == (2, 7)
    xt.train_step(work.training_batch())  # the training step runs


@pytest.mark.parametrize("preset", ["bert", "t5"])
def test_x_transformers_is_compared_on_decoder_only_models_only(preset):
    with pytest.raises(PeerUnavailable, match="decoder-only models only"):
        build_subject("x-transformers", workload(preset))


def test_zoo_bench_help_lists_every_option(capsys, monkeypatch):
    status, out, _ = bench_main(["--help"], capsys, monkeypatch)
    assert status == 0
    for option in (
        "batch=8",
        "seq_len=256",
        "variants=eager,compile,bf16",
        "memory_rounds=3",
        "out=null",
        "FILE.json: also write the figures as JSON",
        "shape=reference",
    ):
        assert option in out, option


@pytest.mark.parametrize(
    "shape, params, batch, seq_len",
    [
        ("gpt2-small", 124_475_904, 16, 1024),  # GPT-2 small with its vocabulary padded to 50,304
        (
            "llama-250m",
            245_924_864,
            8,
            1024,
        ),  # 16 x (2,621,440 attention + 8,650,752 SwiGLU + 2 norms) + 2 x 32000 x 1024 + norm
    ],
)
def test_named_shapes_are_the_models_gpu_users_train(shape, params, batch, seq_len):
    from zoo.cli.bench import configure
    from zoo.models.summary import summarize

    model, opts, _ = configure([f"shape={shape}"])
    with torch.device("meta"):
        built = zoo.build_model(model)
    assert summarize(built, seq_len).total_params == params
    assert (opts.batch, opts.seq_len) == (batch, seq_len)
    model, opts, _ = configure([f"shape={shape}", "batch=2", "model.n_layers=2"])  # later options win
    assert (opts.batch, opts.seq_len, model.n_layers) == (2, seq_len, 2)


@pytest.mark.slow
def test_bf16_compile_variant_runs_zoo_compiled_under_bf16_autocast(tmp_path, capsys, monkeypatch):
    from zoo.bench.run import is_bf16, is_compiled

    assert [(is_bf16(v), is_compiled(v)) for v in ("eager", "compile", "bf16", "bf16-compile")] == [
        (False, False),
        (False, True),
        (True, False),
        (True, True),
    ]
    out = tmp_path / "bench.json"
    status, _, err = bench_main(
        [
            *TINY,
            "batch=2",
            "seq_len=16",
            "rounds=1",
            "steps=1",
            "variants=bf16-compile",
            "peers=none",
            "measure=train",
            f"out={out}",
        ],
        capsys,
        monkeypatch,
    )
    assert status == 0, err[-2000:]
    row = json.loads(out.read_text())["rows"][0]
    assert (row["system"], row["variant"]) == ("zoo", "bf16-compile") and row["train_tokens_per_s"] > 0
    assert set(json.loads(out.read_text())["matmul_flops_per_s"]) == {"float32", "bfloat16"}


def _litgpt_or_skip():
    try:
        import litgpt.model  # noqa: F401
    except ImportError:
        pytest.skip("litgpt is not installed (pip install --no-deps litgpt psutil): the litgpt peer is optional")


@pytest.mark.parametrize("preset", ["gpt", "llama"])
def test_litgpt_peer_has_the_same_shapes_and_decodes_as_its_own_forward(preset):
    _litgpt_or_skip()
    work = workload(preset)
    zoo_subject = build_subject("zoo", work)
    lit = build_subject("litgpt", work, zoo=zoo_subject)
    positions = sum(p.numel() for n, p in zoo_subject.model.named_parameters() if "positions" in n)
    ours = sum(p.numel() for p in zoo_subject.model.parameters()) - positions  # litgpt: RoPE, no table
    theirs = sum(p.numel() for p in lit.model.parameters())
    assert abs(theirs - ours) / ours < 0.03, (ours, theirs)
    prompt = work.prompt(2, 5)
    out = lit.generate(prompt, 6)
    assert out.shape == (2, 6)
    with torch.no_grad():  # greedy through its KV cache = argmax of its full forward, token by token
        seq = prompt
        for _ in range(6):
            seq = torch.cat([seq, lit.model(seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, seq[:, 5:])
    lit.train_step(work.training_batch())


@pytest.mark.parametrize("preset", ["bert", "t5"])
def test_litgpt_is_compared_on_decoder_only_models_only(preset):
    _litgpt_or_skip()
    with pytest.raises(PeerUnavailable, match="decoder-only models only"):
        build_subject("litgpt", workload(preset))


def test_the_peer_names_of_the_options_are_the_peer_table():
    from zoo.bench.options import PEER_NAMES
    from zoo.bench.peers import PEERS

    assert tuple(PEERS) == PEER_NAMES


def test_missing_peers_are_named_before_any_measurement(capsys, monkeypatch):
    """As on a machine without the peers' libraries (made unimportable for this test): the first
    line names them and what is measured instead, before anything is built or timed; the table
    still comes."""
    import sys

    for module in ("transformers", "x_transformers", "litgpt"):
        monkeypatch.setitem(sys.modules, module, None)
    status, out, err = bench_main(
        ["peers=hf,x-transformers", "variants=eager", "measure=forward", "rounds=1", "batch=2", "seq_len=16", *TINY],
        capsys,
        monkeypatch,
    )
    assert status == 0, err[-2000:]
    lines = err.strip().splitlines()
    assert lines[0] == (
        "zoo-bench: hf and x-transformers are not installed (pip install '.[bench]' in zoo's "
        "source directory): measuring zoo alone"
    ), err
    assert any(line.startswith("zoo-bench: built eager") for line in lines[1:])
    assert "| zoo" in out and "hf: not compared" in out and "Traceback" not in err


def test_the_bf16_variants_decode_a_bf16_copy_and_train_the_float32_model():
    """Every system decodes with bfloat16 weights in a bf16 variant (2 bytes read a weight, as
    zoo-generate dtype=bfloat16, transformers' torch_dtype and gpt-fast decode), made once from
    the model's weights; its training step goes on with the float32 model. zoo's tokens are those
    of `zoo.models.generate` on the model cast to bfloat16."""
    import copy

    from zoo.models.generate import GenerationConfig, generate

    work = workload("llama", bf16=True)
    ours = build_subject("zoo", work)
    prompt = work.prompt(2, 5)
    expected = generate(
        copy.deepcopy(ours.model).to(torch.bfloat16), prompt, config=GenerationConfig(), max_new_tokens=6
    )
    assert torch.equal(ours.generate(prompt, 6), expected)
    assert {p.dtype for p in ours._decoder.parameters()} == {torch.bfloat16}
    for system in ("hf", "x-transformers", "gpt-fast"):
        peer = build_subject(system, work, zoo=ours)
        assert peer.generate(prompt, 6).shape == (2, 6)
        assert {p.dtype for p in peer.decoder.parameters()} == {torch.bfloat16}, system
        assert {p.dtype for p in peer.model.parameters()} == {torch.float32}, system
    ours.train_step(work.training_batch())
    assert {p.dtype for p in ours.model.parameters()} == {torch.float32}
