"""A model too large for this machine's memory is refused before anything is built, naming the
key that makes it large; the parameter parts it counts are the built model's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import zoo
from zoo.config.errors import ConfigError
from zoo.config.schema.convert import as_model_config
from zoo.config.schema.params import largest_part, parameter_parts
from zoo.config.schema.validate import validate
from zoo.training.machine import check_host_memory

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "overrides, exact",
    [([], True), (["model=llama"], True), (["model=bert"], False), (["model.tie_embeddings=false"], True)],
)
def test_the_parameter_parts_count_the_built_model(overrides, exact):
    cfg = as_model_config(zoo.compose(overrides).model)
    built = sum(p.numel() for p in zoo.build_model(cfg).parameters())
    counted = sum(parameter_parts(cfg).values())
    assert counted == built if exact else counted <= built, (counted, built)


def test_a_model_larger_than_the_machine_is_refused_naming_its_largest_part():
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    positions = total // (16 * 256) + 1  # learned positions alone past the machine's memory
    spec = validate(zoo.compose([f"model.max_seq_len={positions}"]))
    with pytest.raises(ConfigError, match=r"most come from model.max_seq_len \(learned positions\)"):
        check_host_memory(spec)
    check_host_memory(validate(zoo.compose([])))  # the default fits


MOE = ["model/ffn=moe", "model.bias=false"]


@pytest.mark.parametrize(
    "overrides, key",
    [
        ([*MOE, "model.moe_experts=100000000"], "model.moe_experts"),
        ([*MOE, "model.moe_d_ff=10000000000"], "model.moe_d_ff"),
        ([*MOE, "model.moe_shared=100000"], "model.moe_shared"),
        (["model.n_layers=100000"], "model.n_layers"),
        (["model.d_model=400000"], "model.d_model"),
        (["model.d_ff=100000000"], "model.d_ff"),
        (["model.ff_mult=1000000"], "model.ff_mult"),
        (["model.param_budget=100000000000000"], "model.param_budget"),
        (["model.head_dim=100000000"], "model.head_dim"),
        (["model.n_heads=100000", "model.head_dim=64"], "model.n_heads"),
        (["model=t5", "model.n_decoder_layers=10000000"], "model.n_decoder_layers"),
    ],
)
def test_a_stack_too_large_is_told_the_one_key_that_makes_it_so(overrides, key):
    """Each key that sizes the stack, set far too large alone: the refusal names that key, the
    one to lower in this command (it named model.d_model, model.n_layers, model.d_ff for all)."""
    model = validate(zoo.compose(overrides)).model
    assert largest_part(model, parameter_parts(model))[0] == f"{key} (the stack)"


def test_zoo_train_names_the_mixture_key_that_makes_a_model_too_large(cli_here, tmp_path):
    run = tmp_path / "run"
    result = cli_here("train", *MOE, "model.moe_experts=100000000", f"hydra.run.dir={run}")
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "most come from model.moe_experts (the stack)" in lines[0] and lines[0].endswith("lower it")
    assert not run.exists()


@pytest.mark.slow
def test_the_refusal_comes_before_torch_and_leaves_no_run_directory(tmp_path):
    run = tmp_path / "run"
    script = (
        "import sys; from zoo.cli.train import main; "
        f"sys.argv = ['zoo-train', 'model.max_seq_len=100000000000', 'hydra.run.dir={run}']\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    print('exit', exc.code, 'torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "exit 2 False" in result.stdout, (result.stdout, result.stderr[-2000:])
    assert "model.max_seq_len (learned positions)" in result.stderr and not run.exists()


def test_a_step_of_very_long_attention_is_warned_about_before_it_starts(capsys):
    from zoo.cli.compose import compose
    from zoo.config.schema.validate import validate
    from zoo.training.machine import warn_long_attention

    long = validate(
        compose(
            [
                "model/position=rope",
                "data.seq_len=40000",
                "model.max_seq_len=40000",
                "model.d_model=32",
                "model.n_layers=1",
                "trainer.max_steps=40",
            ]
        )
    )
    warn_long_attention(long)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "data.seq_len 40000 squared" in err and "lower data.seq_len" in err
    warn_long_attention(validate(compose([])))  # the default run: nothing to say
    assert capsys.readouterr().err == ""
