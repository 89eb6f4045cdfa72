"""A file someone sends you can be opened safely: each way a checkpoint or a tokenizer could run
code is replayed here with a payload that would create a marker file, and the marker must never
appear.

- a sharded checkpoint's index (`.metadata`, a pickle) naming `os.system` through a module the
  reader admits, by pickle protocol 4's dotted lookup, and names outside the exact list;
- what the index says of its shards: a shard outside the checkpoint, a link, a forged size;
- a Hugging Face tokenizer directory whose `auto_map` names its own Python code, answered `y`
  at transformers' prompt, given as `tokenizer.path` or carried inside a checkpoint;
- tokenizer files inside a checkpoint that differ from their record, and a record whose path
  leaves the checkpoint.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import zoo
from tests.cli.conftest import tiny_overrides
from tests.interop.tiny_hf import save_tokenizer
from zoo import train
from zoo.config.errors import CheckpointError
from zoo.config.schema.data import TokenizerConfig
from zoo.data import DataError, build_tokenizer
from zoo.data.tokenizers.state import TokenizerStateError, tokenizer_from_state, tokenizer_state
from zoo.training.checkpoint.files import read_checkpoint
from zoo.training.checkpoint.shard_index import allowed_names, read_index


def _s(text: str) -> bytes:
    raw = text.encode()
    return pickle.SHORT_BINUNICODE + bytes([len(raw)]) + raw


def calling(module: str, name: str, *args: str) -> bytes:
    """A protocol-4 pickle whose loading calls `name` looked up in `module` (a dotted name is
    resolved attribute by attribute, as pickle does) with the string `args`."""
    return (
        b"\x80\x04"
        + _s(module)
        + _s(name)
        + pickle.STACK_GLOBAL
        + pickle.MARK
        + b"".join(_s(a) for a in args)
        + pickle.TUPLE
        + pickle.REDUCE
        + pickle.STOP
    )


def test_the_crafted_index_would_run_its_command_under_a_plain_unpickler(tmp_path):
    """The payload is real: pickle alone runs it (so the refusals below are what stops it)."""
    marker = tmp_path / "ran"
    pickle.loads(calling("torch.distributed.checkpoint.filesystem", "os.system", f"touch {marker}"))
    assert marker.exists()


# -- the shard index --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    """A sharded checkpoint torch.distributed.checkpoint writes (one process), with a meta.pt."""
    import warnings

    import torch.distributed.checkpoint as dcp

    directory = tmp_path_factory.mktemp("sharded") / "last.ckpt"
    state = {
        "state_dict": {"w": torch.randn(4, 3), "b": torch.zeros(2, dtype=torch.bfloat16)},
        "optimizer_0": {"state": {0: {"step": torch.tensor(3.0)}}, "param_groups": [{"lr": 0.1, "params": [0]}]},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save(state, checkpoint_id=str(directory), no_dist=True)
    torch.save({"hyper_parameters": {"model": {}, "task": {}}, "global_step": 3}, directory / "meta.pt")
    return directory


def _copy(sharded: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(sharded, tmp_path / "sent.ckpt"))


def test_a_real_index_reads(sharded):
    metadata = read_index(sharded)
    assert {"state_dict.w", "state_dict.b"} <= set(metadata.state_dict_metadata)


@pytest.mark.parametrize(
    "module, name",
    [
        ("torch.distributed.checkpoint.filesystem", "os.system"),  # protocol 4's dotted lookup
        ("torch.distributed.checkpoint.metadata", "torch.os.system"),
        ("torch.distributed.checkpoint.state_dict_saver", "save"),  # a callable under the package, not listed
        ("builtins", "eval"),
        ("torch", "load"),
    ],
)
def test_an_index_naming_anything_off_the_list_is_refused_unrun(sharded, tmp_path, module, name):
    ckpt, marker = _copy(sharded, tmp_path), tmp_path / "ran"
    (ckpt / ".metadata").write_bytes(calling(module, name, f"touch {marker}"))
    with pytest.raises(CheckpointError, match=rf"is refused: {module}\.{name} is not allowed"):
        read_checkpoint(ckpt, weights=False)
    assert not marker.exists()


def test_every_listed_name_is_exact_and_none_is_dotted():
    table = allowed_names()
    assert all("." not in name for _, name in table)
    assert not any(
        callable(v) and getattr(v, "__module__", "").startswith(("os", "subprocess", "builtins"))
        for v in table.values()
    )


def _rewrite_index(ckpt: Path, change) -> None:
    metadata = read_index(ckpt)
    change(metadata)
    (ckpt / ".metadata").write_bytes(pickle.dumps(metadata, protocol=4))


@pytest.mark.parametrize("where", ["../outside.bin", "/etc/hostname", "link.distcp"])
def test_an_index_pointing_out_of_the_checkpoint_is_refused(sharded, tmp_path, where):
    ckpt = _copy(sharded, tmp_path)
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"\0" * 4096)
    (ckpt / "link.distcp").symlink_to(outside)

    def point(metadata):
        for info in metadata.storage_data.values():
            info.relative_path = where

    _rewrite_index(ckpt, point)
    with pytest.raises(CheckpointError, match="names a shard"):
        read_checkpoint(ckpt)


def test_a_forged_tensor_size_is_refused_before_anything_is_allocated(sharded, tmp_path):
    ckpt = _copy(sharded, tmp_path)

    def grow(metadata):
        metadata.state_dict_metadata["state_dict.w"].size = torch.Size([1 << 20, 1 << 20])  # 4 TiB of float32

    _rewrite_index(ckpt, grow)
    with pytest.raises(CheckpointError, match="declares 4,398,0.* bytes of tensors, but its shards hold"):
        read_checkpoint(ckpt)


def test_a_byte_range_past_its_shard_is_refused(sharded, tmp_path):
    ckpt = _copy(sharded, tmp_path)

    def stretch(metadata):
        info = next(iter(metadata.storage_data.values()))
        info.length = 1 << 40

    _rewrite_index(ckpt, stretch)
    with pytest.raises(CheckpointError, match="ends before the bytes its .metadata places there"):
        read_checkpoint(ckpt)


@pytest.mark.parametrize("tool, key", [("eval", "ckpt"), ("generate", "ckpt"), ("train", "ckpt_path")])
def test_the_tools_refuse_a_crafted_index_on_one_line_without_running_it(sharded, tmp_path, tool, key, cli_here):
    ckpt, marker = _copy(sharded, tmp_path), tmp_path / "ran"
    (ckpt / ".metadata").write_bytes(calling("torch.distributed.checkpoint.filesystem", "os.system", f"touch {marker}"))
    extra = {"generate": ["prompt=And"], "train": [*tiny_overrides(tmp_path / "run"), "trainer=fsdp_cpu"]}
    result = cli_here(tool, f"{key}={ckpt}", *extra.get(tool, []))
    assert not marker.exists()
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "os.system is not allowed" in line, line


# -- tokenizers -------------------------------------------------------------------------------


def _plant_code(directory: Path, marker: Path) -> None:
    """transformers' custom-code hook: auto_map names a class in a .py file of the directory."""
    (directory / "evil_tok.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        "from transformers import PreTrainedTokenizerFast\n"
        "class EvilTokenizer(PreTrainedTokenizerFast):\n    pass\n"
    )
    config_file = directory / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config["tokenizer_class"] = "EvilTokenizer"
    config["auto_map"] = {"AutoTokenizer": [None, "evil_tok.EvilTokenizer"]}
    config_file.write_text(json.dumps(config))


def _answer_yes(script: str) -> subprocess.CompletedProcess:
    """`script` in a process of its own whose standard input answers `y` to any prompt."""
    return subprocess.run(
        [sys.executable, "-c", script],
        input="y\n" * 5,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )


def test_transformers_alone_would_run_the_directorys_code_on_a_yes(tmp_path):
    """The attack is real: transformers' own loader asks and, answered `y`, runs the file."""
    save_tokenizer(tmp_path / "tok")
    marker = tmp_path / "ran"
    _plant_code(tmp_path / "tok", marker)
    _answer_yes(f"from transformers import AutoTokenizer\nAutoTokenizer.from_pretrained({str(tmp_path / 'tok')!r})")
    assert marker.exists()


def test_a_tokenizer_directory_naming_code_is_refused_without_asking(tmp_path):
    save_tokenizer(tmp_path / "tok")
    marker = tmp_path / "ran"
    _plant_code(tmp_path / "tok", marker)
    result = _answer_yes(
        "from zoo.data import build_tokenizer, DataError\n"
        "from zoo.config.schema.data import TokenizerConfig\n"
        f"try:\n    build_tokenizer(TokenizerConfig(kind='hf', path={str(tmp_path / 'tok')!r}))\n"
        "except DataError as exc:\n    print(exc)\n"
    )
    assert not marker.exists()
    assert "Do you wish to run the custom code" not in result.stdout + result.stderr
    assert "names Python code to run with the tokenizer (auto_map)" in result.stdout, result.stderr[-2000:]


def test_remote_code_is_refused_even_where_no_auto_map_is_seen(tmp_path):
    """transformers is told trust_remote_code=False: a config naming code another way is refused
    by transformers itself, without a prompt."""
    import zoo.data.tokenizers.hf as hf
    from zoo.data.tokenizers.hf import auto_tokenizer

    save_tokenizer(tmp_path / "tok")
    marker = tmp_path / "ran"
    _plant_code(tmp_path / "tok", marker)
    original = hf.names_code
    hf.names_code = lambda directory: None  # as if zoo's own reading of auto_map missed it
    try:
        with pytest.raises(DataError, match="no Hugging Face tokenizer could be loaded"):
            auto_tokenizer(tmp_path / "tok")
    finally:
        hf.names_code = original
    assert not marker.exists()


@pytest.fixture(scope="module")
def hf_state(tmp_path_factory) -> dict:
    """The tokenizer entry a checkpoint carries for an hf tokenizer."""
    directory = tmp_path_factory.mktemp("hf") / "tok"
    save_tokenizer(directory)
    return tokenizer_state(build_tokenizer(TokenizerConfig(kind="hf", path=str(directory))))


def _record(state: dict) -> dict:
    return json.loads(state["tokenizer.json"])


def test_tokenizer_files_added_to_a_checkpoint_are_refused_before_they_are_read(hf_state, tmp_path):
    marker = tmp_path / "ran"
    state = dict(hf_state)
    state["hf/evil_tok.py"] = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n".encode()
    with pytest.raises(TokenizerStateError, match="holds hf/evil_tok.py, which its record does not list"):
        tokenizer_from_state(state)
    changed = dict(hf_state)
    changed["hf/tokenizer.json"] = changed["hf/tokenizer.json"] + b" "  # one byte more
    with pytest.raises(TokenizerStateError, match="hf/tokenizer.json does not match the digest recorded"):
        tokenizer_from_state(changed)
    assert not marker.exists()


def test_a_checkpoint_tokenizer_naming_code_with_a_matching_record_is_refused(hf_state, tmp_path):
    """The files and their record forged together (the record is no signature): the code is still
    refused, in a process whose standard input answers `y`."""
    import hashlib

    marker = tmp_path / "ran"
    state = dict(hf_state)
    state["hf/evil_tok.py"] = (
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        "from transformers import PreTrainedTokenizerFast\n"
        "class EvilTokenizer(PreTrainedTokenizerFast):\n    pass\n"
    ).encode()
    config = json.loads(state["hf/tokenizer_config.json"])
    config.update(tokenizer_class="EvilTokenizer", auto_map={"AutoTokenizer": [None, "evil_tok.EvilTokenizer"]})
    state["hf/tokenizer_config.json"] = json.dumps(config).encode()
    record = _record(state)
    record["files"] = {
        name: hashlib.sha256(data).hexdigest() for name, data in state.items() if name != "tokenizer.json"
    }
    state["tokenizer.json"] = json.dumps(record).encode()
    saved = tmp_path / "state.pt"
    torch.save(state, saved)
    result = _answer_yes(
        "import torch\nfrom zoo.data.tokenizers.state import tokenizer_from_state, TokenizerStateError\n"
        f"try:\n    tokenizer_from_state(torch.load({str(saved)!r}, weights_only=True))\n"
        "except TokenizerStateError as exc:\n    print(exc)\n"
    )
    assert not marker.exists()
    assert "names Python code to run with the tokenizer" in result.stdout, result.stderr[-2000:]


@pytest.mark.parametrize("path", ["/tmp", "../../..", "hf/../../.."])
def test_a_record_path_leaving_the_checkpoint_is_refused(hf_state, path):
    state = dict(hf_state)
    record = _record(state)
    record["path"] = path
    state["tokenizer.json"] = json.dumps(record).encode()
    with pytest.raises(TokenizerStateError, match="is not a name inside it"):
        tokenizer_from_state(state)


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("lm")
    overrides = [o for o in tiny_overrides(run) if not o.startswith("hydra.")]
    train(zoo.compose(overrides), run)
    return run / "checkpoints" / "last.ckpt"


@pytest.mark.slow  # trains a checkpoint, then a zoo-generate process
def test_zoo_generate_refuses_a_checkpoint_whose_tokenizer_names_code(tiny_ckpt, hf_state, tmp_path):
    """The whole path a user takes: a .ckpt someone sent, `zoo-generate ckpt=...`, `y` typed at
    any prompt; one line, and the code never ran."""
    marker = tmp_path / "ran"
    data = torch.load(tiny_ckpt, weights_only=True)
    state = dict(hf_state)
    state["hf/evil_tok.py"] = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n".encode()
    data["zoo_tokenizer"] = state
    sent = tmp_path / "sent.ckpt"
    torch.save(data, sent)
    result = subprocess.run(
        [sys.executable, "-m", "zoo.cli.generate", f"ckpt={sent}", "prompt=And"],
        input="y\n" * 5,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert not marker.exists()
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    (line,) = result.stderr.strip().splitlines()
    assert "which its record does not list" in line, line
