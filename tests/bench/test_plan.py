"""zoo-plan: the parts of a plan move as a strategy, precision and checkpointing say they
must, the largest micro-batch is the edge of what fits, bad input is refused in one line, and
one plan is held against a measured training step."""

from __future__ import annotations

import dataclasses

import pytest

from zoo.config.schema.model import ModelConfig
from zoo.plan.measure import peak_training_memory
from zoo.plan.options import PlanOptions
from zoo.plan.planner import BUCKETS, GATHERED, largest_micro_batch, plan
from zoo.plan.trace import ACTIVATIONS, BUFFERS, GRADIENTS, LOSS, MUON_WORK, OPTIMIZER, WEIGHTS

TINY = ModelConfig(d_model=64, n_heads=2, n_layers=2, vocab_size=512, max_seq_len=64)


def options(**kw) -> PlanOptions:
    return PlanOptions(**{"batch": 4, "seq_len": 64, "device": "cpu", "precision": "32-true", "memory": "1GiB", **kw})


def test_fsdp_at_world_size_2_halves_weights_gradients_and_moments():
    tiny = dict(batch=1, seq_len=8)  # weights, gradients and moments outweigh the activations
    whole, sharded = plan(TINY, options(**tiny)), plan(TINY, options(**tiny, strategy="fsdp", world_size=2))
    assert sharded.parts[WEIGHTS] == pytest.approx(whole.parts[WEIGHTS] / 2, rel=0.01)
    assert sharded.parts[OPTIMIZER] == pytest.approx(whole.parts[OPTIMIZER] / 2, rel=0.05)  # + one tensor's update
    assert 0 < sharded.parts[GRADIENTS] <= whole.step.param_bytes / 2  # the peak may come before all exist
    assert sharded.step.peak < whole.step.peak
    assert sharded.parts[GATHERED] > 0 and GATHERED not in whole.parts


def test_hsdp_holds_what_fsdp_over_its_shard_group_holds():
    hsdp = plan(TINY, options(strategy="hsdp", world_size=8, replicate=2))
    fsdp = plan(TINY, options(strategy="fsdp", world_size=4))
    assert hsdp.parts == fsdp.parts


def test_adamw_holds_two_moments_in_the_parameters_dtype():
    for precision in ("32-true", "bf16-true"):
        p = plan(TINY, options(precision=precision))
        steps = 4 * len(list(p.step.layer_param_bytes))  # plus a scalar step count per parameter
        assert p.parts[OPTIMIZER] == pytest.approx(2 * p.parts[WEIGHTS], rel=0.01, abs=64 * steps)
    assert plan(TINY, options(precision="bf16-true")).parts[WEIGHTS] == plan(TINY, options()).parts[WEIGHTS] // 2


def test_muon_holds_one_buffer_per_hidden_matrix_and_adamws_two_moments_elsewhere():
    """The state a planned Muon step holds is its row's (zoo.config.facts.optimizers): 1 number per
    parameter of the hidden matrices, 2 elsewhere, in the parameters' dtype."""
    from zoo.models import build_model
    from zoo.tasks.muon import hidden_matrices

    model = build_model(TINY, init_seed=0)
    head = model.lm_head.weight if model.lm_head is not None else None
    hidden = sum(p.numel() for p in model.parameters() if id(p) in hidden_matrices(model, head))
    for precision, size in (("32-true", 4), ("bf16-true", 2)):
        adamw, muon = plan(TINY, options(precision=precision)), plan(TINY, options(precision=precision, optim="muon"))
        steps = 4 * len(list(adamw.step.layer_param_bytes))  # plus a scalar step count per parameter
        expected = 2 * adamw.parts[WEIGHTS] - size * hidden
        assert muon.parts[OPTIMIZER] == pytest.approx(expected, rel=0.01, abs=64 * steps)
        assert muon.parts[WEIGHTS] == adamw.parts[WEIGHTS]


def test_normuon_adds_a_float32_number_per_row_of_each_hidden_matrix():
    """optim.muon_variant=normuon's state is Muon's plus its row's `row_state` (zoo.config.facts.muon):
    one float32 number per row of each hidden matrix, whole, and halved with the rows under FSDP."""
    from zoo.config.facts.muon import MUON_VARIANTS, MuonVariant
    from zoo.models import build_model
    from zoo.tasks.muon import hidden_matrices

    model = build_model(TINY, init_seed=0)
    head = model.lm_head.weight if model.lm_head is not None else None
    rows = sum(p.shape[0] for p in model.parameters() if id(p) in hidden_matrices(model, head))
    per_row = 4 * MUON_VARIANTS[MuonVariant.normuon].row_state
    assert per_row == 4
    for precision in ("32-true", "bf16-true"):
        muon = plan(TINY, options(precision=precision, optim="muon"))
        normuon = plan(TINY, options(precision=precision, optim="muon", muon_variant="normuon"))
        assert normuon.parts[OPTIMIZER] - muon.parts[OPTIMIZER] == per_row * rows
    sharded = {
        variant: plan(TINY, options(optim="muon", muon_variant=variant, strategy="fsdp", world_size=2))
        for variant in ("muon", "normuon")
    }
    assert sharded["normuon"].parts[OPTIMIZER] - sharded["muon"].parts[OPTIMIZER] == per_row * rows // 2


def test_ddp_adds_a_copy_of_the_gradients_as_buckets():
    p = plan(TINY, options(strategy="ddp", world_size=4))
    assert p.parts[BUCKETS] == p.step.param_bytes == p.parts[WEIGHTS]


def test_checkpointing_lowers_activations_and_they_grow_with_the_batch():
    cfg = dataclasses.replace(TINY, n_layers=4)
    kept, recomputed = plan(cfg, options()), plan(dataclasses.replace(cfg, checkpoint_activations=True), options())
    assert recomputed.parts[ACTIVATIONS] < kept.parts[ACTIVATIONS] / 2
    assert plan(cfg, options(batch=8)).parts[ACTIVATIONS] > 1.8 * kept.parts[ACTIVATIONS]


def test_the_logits_path_holds_more_than_the_chunked_loss():
    assert (
        plan(TINY, options(output_loss="logits")).parts[LOSS] > plan(TINY, options(output_loss="chunked")).parts[LOSS]
    )


def test_the_largest_micro_batch_fits_and_one_more_does_not_and_grows_with_memory():
    found = []
    for memory in ("40MiB", "80MiB"):
        opts = options(memory=memory)
        b, plans = largest_micro_batch(TINY, opts)
        assert b >= 1 and plans[b].fits and not plan(TINY, opts, b + 1).fits
        found.append(b)
    assert found[0] < found[1]
    assert largest_micro_batch(TINY, options(memory="1MiB"))[0] == 0


def zoo_plan(argv, capsys, monkeypatch):
    from tests.conftest import run_main
    from zoo.cli import plan as cli

    return run_main(cli.main, ["zoo-plan", *argv], capsys, monkeypatch)


SMALL = [
    "model.d_model=64",
    "model.n_heads=2",
    "model.n_layers=2",
    "model.vocab_size=512",
    "model.max_seq_len=64",
    "seq_len=64",
    "device=cpu",
    "precision=32-true",
]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["precision=fp8"], "precision='fp8' is not allowed; choose one of: 32-true, bf16-mixed, bf16-true"),
        (["memory=lots"], "memory='lots': write a size such as 80GiB"),
        (["strategy=hsdp", "world_size=6", "replicate=4"], "world_size (6) must be divisible by replicate (4)"),
        (["world_size=2"], "world_size=2 needs a strategy"),
        (["trainer.max_steps=3"], "zoo-plan takes model overrides"),
        (
            ["seq_len=128"],
            "seq_len=128 is longer than model.max_seq_len=64: lower seq_len or raise model.max_seq_len=128",
        ),
        (["batch=0"], "batch must be a positive integer, got 0"),
        (["muon_variant=normuon"], "muon_variant=normuon applies to optim=muon only; add optim=muon"),
        # sizes that would run for minutes or overflow torch's sizes: refused before a step is simulated
        (["model.n_layers=100000"], "model.n_layers=100000: zoo-plan runs each layer"),
        (
            ["model.n_decoder_layers=100", "model=t5", "model.n_layers=100"],
            "model.n_layers + model.n_decoder_layers=200",
        ),
        (
            ["model.d_model=100000000000", "model.n_heads=1"],
            "model.d_model=100000000000: zoo-plan plans widths of up to",
        ),
        (["model.vocab_size=99999999999999"], "model.vocab_size=99999999999999"),
        (
            ["model.kv=latent", "model.kv_lora_rank=99999999999"],
            "model.kv_lora_rank=99999999999: zoo-plan plans widths",
        ),
        (["batch=100000000000000000000"], "batch=100000000000000000000: zoo-plan plans micro-batches of up to 65,536"),
        (["model.max_seq_len=10000000000", "seq_len=10000000000"], "model.max_seq_len=10000000000"),
        (["model.max_seq_len=16777216", "seq_len=16777216", "batch=65536"], "the attention scores"),
    ],
)
def test_zoo_plan_refuses_bad_input_in_one_line(argv, message, capsys, monkeypatch):
    import time

    started = time.monotonic()
    status, _, err = zoo_plan([*SMALL, *argv], capsys, monkeypatch)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("zoo-plan: error: ") and message in lines[0], err
    assert time.monotonic() - started < 15, "refused only after simulating"


def test_zoo_plan_prints_the_table_and_says_why_a_plan_does_not_fit(capsys, monkeypatch):
    status, out, _ = zoo_plan([*SMALL, "batch=64", "memory=40MiB"], capsys, monkeypatch)
    assert status == 1  # the status says it does not fit
    assert "| weights |" in out and "| **total** |" in out and "largest micro-batch that fits 40.00 MiB:" in out
    assert "does not fit:" in out and "data.max_device_batch_size=" in out


def test_zoo_plans_exit_status_says_whether_the_plan_fits(capsys, monkeypatch):
    """0 when it fits (the test above: 1 when it does not)."""
    fits, out, _ = zoo_plan([*SMALL, "batch=1", "memory=40MiB"], capsys, monkeypatch)
    assert fits == 0 and "fits:" in out and "does not fit" not in out


def _examples(text: str) -> list[list[str]]:
    """The zoo-plan command lines of a page or help text (indented, starting `zoo-plan `)."""
    import shlex

    lines = [line.strip().split("#")[0] for line in text.splitlines() if line.strip().startswith("zoo-plan ")]
    return [shlex.split(line)[1:] for line in lines]


@pytest.mark.slow
def test_every_zoo_plan_example_runs_as_printed(tmp_path, capsys, monkeypatch):
    """The examples of docs/memory-planner.md and of `zoo-plan --help`: each answers with a plan
    (fits: 0, or does not fit: 1), none with a refusal."""
    from pathlib import Path

    from zoo.cli import plan as cli

    page = (Path(__file__).resolve().parents[2] / "docs" / "memory-planner.md").read_text()
    examples = _examples(page) + _examples(cli.__doc__)
    assert len(examples) >= 8
    examples = [argv for i, argv in enumerate(examples) if argv not in examples[:i]]  # one run of a repeated one
    monkeypatch.chdir(tmp_path)  # out=plan.json lands here
    for argv in examples:
        status, out, err = zoo_plan(argv, capsys, monkeypatch)
        assert status in (0, 1) and "| **total** |" in out and not err.strip(), (argv, err)


def test_zoo_plan_help_lists_every_option(capsys, monkeypatch):
    status, out, _ = zoo_plan(["--help"], capsys, monkeypatch)
    assert status == 0
    for key in (f.name for f in dataclasses.fields(PlanOptions)):
        assert f"  {key}=" in out


@pytest.mark.slow
def test_a_plan_is_within_15_percent_of_a_measured_step():
    cfg = ModelConfig(d_model=256, n_heads=4, n_layers=4, vocab_size=8192, max_seq_len=256)
    planned = plan(cfg, PlanOptions(batch=8, seq_len=256, precision="32-true", device="cpu", memory="16GiB"))
    measured = peak_training_memory({"model": cfg.to_dict(), "batch": 8, "seq_len": 256, "precision": "32-true"})
    assert planned.total / measured["total_bytes"] == pytest.approx(1.0, abs=0.15)
    above_weights = planned.total - planned.parts[WEIGHTS] - planned.parts[BUFFERS]
    assert above_weights / measured["training_bytes"] == pytest.approx(1.0, abs=0.15)


def test_muons_work_on_a_whole_matrix_is_not_divided_by_the_shards():
    """Under FSDP a rank gathers each hidden matrix's update and orthogonalises it whole
    (zoo.config.facts.muon): what that makes (MUON_WORK) is at least the largest hidden matrix in
    float32 at every shard count, while the state beside it is divided; AdamW makes none."""
    from zoo.models import build_model
    from zoo.tasks.muon import hidden_matrices

    wide = ModelConfig(d_model=256, n_heads=2, n_layers=1, vocab_size=64, max_seq_len=8)  # matrices outweigh all
    model = build_model(wide, init_seed=0)
    head = model.lm_head.weight if model.lm_head is not None else None
    largest = max(p.numel() for p in model.parameters() if id(p) in hidden_matrices(model, head))
    tiny = dict(batch=1, seq_len=8, optim="muon")
    plans = [plan(wide, options(**tiny))] + [plan(wide, options(**tiny, strategy="fsdp", world_size=n)) for n in (2, 8)]
    assert all(p.step.peak_phase == "update" for p in plans)
    assert all(p.parts[MUON_WORK] >= 4 * largest for p in plans)
    assert len({p.parts[MUON_WORK] for p in plans}) == 1  # whole on every rank
    assert plans[2].parts[OPTIMIZER] < plans[1].parts[OPTIMIZER] < plans[0].parts[OPTIMIZER]
    assert plan(wide, options(batch=1, seq_len=8)).parts[MUON_WORK] == 0


@pytest.mark.parametrize(
    "cfg, batch",
    [
        # a vocabulary large beside the width: the peak is in the loss (one chunk alone would miss
        # it); 20 chunks of 64 rows, and 12 of the masked-LM's 15% of the rows
        (ModelConfig(d_model=32, n_heads=2, n_layers=1, vocab_size=5000, max_seq_len=64, final_softcap=30.0), 20),
        (ModelConfig(family="encoder_only", d_model=32, n_heads=2, n_layers=1, vocab_size=5000, max_seq_len=64), 80),
    ],
    ids=["decoder-softcap", "encoder-sparse-targets"],
)
def test_tracing_the_first_chunks_of_the_loss_finds_the_peak_of_every_chunk(cfg, batch):
    """The planner traces the chunked loss's loop for its first chunks only
    (zoo.nn.chunked_loss.first_chunks_only): at 12 or 20 chunks, the peak and every part of it are
    those of the trace of every chunk (and those of the first chunk alone are not)."""
    from zoo.config.schema.task import OutputLoss
    from zoo.plan.trace import StepSetup, simulate_step

    setup = StepSetup(batch=batch, seq_len=64, precision="32-true", output_loss=OutputLoss.chunked, loss_chunk=64)
    every, first = simulate_step(cfg, setup, chunks=None), simulate_step(cfg, setup)
    assert (first.peak, first.parts, first.peak_phase) == (every.peak, every.parts, every.peak_phase)
    assert every.peak_phase == "loss" and simulate_step(cfg, setup, chunks=1).peak < every.peak
