"""A Hugging Face directory given to `zoo-train init_from=hf:DIR` is input like any other: what
it holds is checked before it is read, and a refusal under init_from names what the command can
change (the data keys, the directory, or dropping init_from), never a model key init_from forbids.
Each case replays the command through zoo-train's main() in this process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.interop.tiny_hf import save_model, save_tokenizer

RUN = [
    "data=pydoc",
    "data.seq_len=32",
    "data.global_batch_size=4",
    "data.max_examples=40",
    "trainer.max_steps=2",
    "trainer.limit_val_batches=1",
    "callbacks.progress_bar=none",
    "scheduler.warmup_steps=1",
]


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory) -> Path:
    """A tiny Llama directory as save_pretrained writes one."""
    directory = tmp_path_factory.mktemp("llama")
    save_model(directory, "llama")
    return directory


def _copy(directory: Path, target: Path) -> Path:
    shutil.copytree(directory, target)
    return target


def _refused(result, *fragments: str) -> str:
    """The one line of a refusal (exit 2, no traceback), holding every fragment."""
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def _llama_config(directory: Path, **fields) -> None:
    from transformers import LlamaConfig

    base = dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    LlamaConfig(**{**base, **fields}).save_pretrained(directory)


# -- refusals under init_from name what the command can change --------------------------------


def test_a_directory_too_large_for_the_machine_names_the_directory_not_a_model_key(tmp_path, cli_here):
    """It used to say "most come from model.vocab_size ...; lower it", a key init_from refuses."""
    directory = tmp_path / "big"
    _llama_config(directory, vocab_size=2**40)
    init = f"init_from=hf:{directory}"
    line = _refused(cli_here("train", init, *RUN, f"hydra.run.dir={tmp_path / 'run'}"), "more than this machine's")
    assert line.endswith(f"{init} fixes the architecture: give the directory of a smaller model, or drop init_from")
    assert "lower it" not in line
    assert not (tmp_path / "run").exists()


def test_a_tokenizer_larger_than_the_directorys_vocabulary_names_the_tokenizer_not_model_vocab_size(tmp_path, cli_here):
    """It used to say "set model.vocab_size=320 or more", a key init_from refuses."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    directory = tmp_path / "llama"
    tokenizer = save_tokenizer(directory)  # 320 tokens
    _llama_config(directory, vocab_size=300)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig.from_pretrained(directory)).save_pretrained(directory)
    init = f"init_from=hf:{directory}"
    line = _refused(
        cli_here("train", init, *RUN, f"hydra.run.dir={tmp_path / 'run'}"),
        f"model.vocab_size (300) is smaller than the hf tokenizer's vocabulary ({len(tokenizer)})",
    )
    assert line.endswith(
        f"{init} fixes model.vocab_size: give tokenizer.path a tokenizer of 300 tokens at most (the "
        "directory's own is the default), another directory, or drop init_from"
    )
    assert "set model.vocab_size" not in line
