"""A Hugging Face directory given to `zoo-train init_from=hf:DIR` is input like any other: what
it holds is checked before it is read, and a refusal under init_from names what the command can
change (the data keys, the directory, or dropping init_from), never a model key init_from forbids.
Each case replays the command through zoo-train's main() in this process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.interop.tiny_hf import TINY_LLAMA, save_model, save_tokenizer

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


def assert_refused(result, *fragments: str) -> str:
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

    LlamaConfig(**{**TINY_LLAMA, **fields}).save_pretrained(directory)


# -- refusals under init_from name what the command can change --------------------------------


def test_a_directory_too_large_for_the_machine_names_the_directory_not_a_model_key(tmp_path, cli_here):
    """It used to say "most come from model.vocab_size ...; lower it", a key init_from refuses."""
    directory = tmp_path / "big"
    _llama_config(directory, vocab_size=2**40)
    init = f"init_from=hf:{directory}"
    line = assert_refused(
        cli_here("train", init, *RUN, f"hydra.run.dir={tmp_path / 'run'}"), "more than this machine's"
    )
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
    line = assert_refused(
        cli_here("train", init, *RUN, f"hydra.run.dir={tmp_path / 'run'}"),
        f"model.vocab_size (300) is smaller than the hf tokenizer's vocabulary ({len(tokenizer)})",
    )
    assert line.endswith(
        f"{init} fixes model.vocab_size: give tokenizer.path a tokenizer of 300 tokens at most (the "
        "directory's own is the default), another directory, or drop init_from"
    )
    assert "set model.vocab_size" not in line


# -- the directory's files are regular files inside it, of bounded size ------------------------


@pytest.fixture
def unblock():
    """Opens the pipes given to it for writing after 30 s, so that a read that blocks on one
    ends (with nothing read) and the test fails instead of hanging."""
    import os
    import threading

    pipes: list[Path] = []

    def release() -> None:
        for pipe in pipes:
            try:
                os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass  # no reader: nothing blocks

    timer = threading.Timer(30, release)
    timer.start()
    yield pipes.append
    timer.cancel()


@pytest.mark.parametrize("name", ["tokenizer_config.json", "config.json", "model.safetensors"])
def test_a_pipe_in_the_directory_is_named_and_never_opened(name, llama_dir, tmp_path, cli_here, unblock):
    """A pipe in place of one of DIR's files used to hang the run at its first read."""
    import os

    directory = _copy(llama_dir, tmp_path / "llama")
    (directory / name).unlink()
    os.mkfifo(directory / name)
    unblock(directory / name)
    result = cli_here("train", f"init_from=hf:{directory}", *RUN, f"hydra.run.dir={tmp_path / 'run'}")
    assert_refused(result, f"init_from=hf:{directory}: {name} is a pipe, not a regular file")
    assert not (tmp_path / "run").exists()


def test_a_link_out_of_the_directory_or_an_oversized_file_is_refused(llama_dir, tmp_path, cli_here):
    directory = _copy(llama_dir, tmp_path / "llama")
    outside = tmp_path / "elsewhere.json"
    (directory / "tokenizer_config.json").rename(outside)
    (directory / "tokenizer_config.json").symlink_to(outside)
    init = f"init_from=hf:{directory}"
    assert_refused(cli_here("train", init, *RUN), f"{init}: tokenizer_config.json is a link out of the directory")
    (directory / "tokenizer_config.json").unlink()
    outside.rename(directory / "tokenizer_config.json")
    with open(directory / "tokenizer.json", "r+b") as f:
        f.truncate(257 * 2**20)  # sparse: no disk written
    assert_refused(
        cli_here("train", init, *RUN), f"{init}: tokenizer.json has 269,484,032 bytes, more than the 256 MiB"
    )
    # the tokenizer alone (tokenizer=hf tokenizer.path=DIR) reads its directory the same way
    os_fifo = tmp_path / "tokenizer-only"
    _copy(llama_dir, os_fifo)
    (os_fifo / "special_tokens_map.json").unlink(missing_ok=True)
    (os_fifo / "special_tokens_map.json").symlink_to(outside)
    result = cli_here(
        "train",
        "tokenizer=hf",
        f"tokenizer.path={os_fifo}",
        "model.vocab_size=320",
        *RUN,
        f"hydra.run.dir={tmp_path / 'r'}",
    )
    assert_refused(result, f"tokenizer.path={os_fifo}: special_tokens_map.json is a link out of the directory")


# -- safetensors headers and config.json numbers are checked before they are used ---------------


def _rewrite_header(file: Path, change) -> None:
    """`file` (safetensors) with its header JSON changed by `change(header) -> header | bytes`
    (bytes: the whole file as it is to be written)."""
    import struct

    data = file.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    changed = change(header, data[8 + length :])
    if isinstance(changed, bytes):
        file.write_bytes(changed)
        return
    text = json.dumps(changed).encode()
    file.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length :])


def _largest(header: dict) -> str:
    return max(
        (k for k in header if k != "__metadata__"),
        key=lambda k: header[k]["data_offsets"][1] - header[k]["data_offsets"][0],
    )


def _header_past_the_file(header, body):
    import struct

    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text) + len(body) + 1000) + text + body


def _shape_past_its_range(header, body):
    key = _largest(header)
    header[key]["shape"] = [header[key]["shape"][0] * 2, *header[key]["shape"][1:]]
    return header


def _overlapping_offsets(header, body):
    key = _largest(header)
    begin, end = header[key]["data_offsets"]
    header[key]["data_offsets"] = [begin - 4 if begin >= 4 else begin + 4, end - 4 if begin >= 4 else end + 4]
    return header


@pytest.mark.parametrize(
    "change, words",
    [
        (_header_past_the_file, "its header length"),
        (_shape_past_its_range, "needs"),
        (_overlapping_offsets, "overlap or gap"),
    ],
    ids=["header-length", "shape", "offsets"],
)
def test_a_safetensors_file_whose_header_lies_is_one_line(change, words, llama_dir, tmp_path, cli_here):
    """These ended in safetensors' SafetensorError, a traceback."""
    directory = _copy(llama_dir, tmp_path / "llama")
    _rewrite_header(directory / "model.safetensors", change)
    run = tmp_path / "run"
    line = assert_refused(cli_here("train", f"init_from=hf:{directory}", *RUN, f"hydra.run.dir={run}"), words)
    assert f"init_from=hf:{directory}: model.safetensors is not a whole safetensors file" in line
    assert not (run / "checkpoints").exists()


@pytest.mark.parametrize(
    "family, field, value, words",
    [
        ("gemma2", "query_pre_attn_scalar", 0, "it must be greater than 0"),
        ("gemma2", "attn_logit_softcapping", -1.0, "it must be greater than 0"),
        ("gemma2", "final_logit_softcapping", -30.0, "it must be greater than 0"),
        ("llama", "head_dim", 0, "it must be a whole number of at least 1"),
        ("llama", "rope_theta", float("nan"), "a config field must be a finite number"),
        ("llama", "rms_norm_eps", float("inf"), "a config field must be a finite number"),
    ],
)
def test_a_config_number_out_of_range_names_the_field(family, field, value, words, tmp_path, cli_here):
    directory = tmp_path / family
    save_model(directory, family)
    config = json.loads((directory / "config.json").read_text())
    config[field] = value
    (directory / "config.json").write_text(json.dumps(config))  # NaN and Infinity as json writes them
    init = f"init_from=hf:{directory}"
    line = assert_refused(cli_here("train", init, *RUN), f"{init}: config.json field {field} is ")
    assert words in line
