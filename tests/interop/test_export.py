"""`zoo-export`: a checkpoint trained by zoo-train becomes a transformers directory that
`from_pretrained` loads and that computes the same logits."""

from __future__ import annotations

import sys

import pytest
import torch
import transformers  # a test dependency: missing, these tests fail rather than skip

from tests.cli.conftest import tiny_overrides  # noqa: E402
from zoo.training.checkpoint.files import load_checkpoint  # noqa: E402

PRESETS = {  # name: (overrides, transformers Auto class that loads the export)
    "llama": (["model=llama", "model.n_kv_heads=1"], "AutoModelForCausalLM"),
    "gpt2": (["model=gpt"], "AutoModelForCausalLM"),
    "bert": (["model=bert"], "AutoModelForMaskedLM"),
    "t5": (["model=t5", "model.n_decoder_layers=1"], "AutoModelForSeq2SeqLM"),
    # a sliding and a full layer (a window of 4 keys), soft-caps, norms before and after each sublayer
    "gemma2": (["model=gemma2", "model.window=4", "model.n_layers=2"], "AutoModelForCausalLM"),
    # a mixture of experts trained with its router losses (its checkpoint holds the stacked experts)
    "mixtral": (["model=mixtral", "model.moe_experts=4"], "AutoModelForCausalLM"),
    # sinks, a sliding and a full layer, gpt-oss's experts with their biases (transformers' interleaved gate/up)
    "gpt_oss": (
        ["model=gpt_oss", "model.moe_experts=4", "model.moe_top_k=2", "model.window=4", "model.n_layers=2"],
        "AutoModelForCausalLM",
    ),
}


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.slow
def test_a_trained_checkpoint_exports_and_loads_in_transformers(tmp_path, name, cli_here):
    """zoo-train and zoo-export as their main() in this process (zoo-export runs as a process of
    its own in tests/training/distributed/test_fsdp.py); transformers loads what it wrote."""
    overrides, auto = PRESETS[name]
    run = tmp_path / "run"
    trained = cli_here("train", *tiny_overrides(run), *overrides)
    assert trained.returncode == 0, trained.stderr[-3000:]
    ckpt = run / "checkpoints" / "last.ckpt"
    out = tmp_path / "hf"
    result = cli_here("export", f"ckpt={ckpt}", "format=hf", f"out={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "config.json").is_file() and (out / "zoo_tokenizer").is_dir()

    hf = getattr(transformers, auto).from_pretrained(out).eval()
    task = load_checkpoint(ckpt)
    ids = torch.tensor([task.tokenizer.encode("And God said, Let there be light")])
    inputs = {"decoder_input_ids": ids[:, :5]} if name == "t5" else {}
    with torch.no_grad():
        diff = (hf(input_ids=ids, **inputs).logits - task.model(ids, **inputs).logits).abs().max()
    assert float(diff) <= 1e-4

    again = cli_here("export", f"ckpt={ckpt}", "format=hf", f"out={out}")  # never overwrites
    assert again.returncode == 2 and "not empty" in again.stderr


@pytest.mark.slow
def test_a_composition_without_a_family_is_refused_on_one_line(tmp_path, cli_here):
    run = tmp_path / "run"
    assert cli_here("train", *tiny_overrides(run), "model/position=alibi").returncode == 0
    result = cli_here("export", f"ckpt={run / 'checkpoints' / 'last.ckpt'}", "format=hf", f"out={tmp_path / 'hf'}")
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("zoo-export: error:")]
    assert len(lines) == 1 and "matches no supported" in lines[0]
    assert not (tmp_path / "hf").exists()


@pytest.mark.slow
def test_bad_arguments(tmp_path, cli_here):
    assert "required" in cli_here("export", "format=hf").stderr
    assert "format='onnx'" in cli_here("export", f"ckpt={tmp_path}/x.ckpt", "format=onnx", f"out={tmp_path}/o").stderr


def test_without_transformers_the_export_says_how_to_install_it(tmp_path, monkeypatch):
    from zoo.cli.export import run
    from zoo.config.errors import ConfigError

    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now fails
    with pytest.raises(ConfigError, match=r"needs transformers: pip install '\.\[hf\]' in zoo's source directory"):
        run([f"ckpt={tmp_path / 'x.ckpt'}", "format=hf", f"out={tmp_path / 'out'}"])
    assert not (tmp_path / "out").exists()
