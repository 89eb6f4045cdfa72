"""A model directory written by another program (`init_from=hf:DIR`, `tokenizer=hf
tokenizer.path=DIR`) is input: what zoo (or transformers, for zoo) reads from it is checked
before anything is opened, each refusal one line naming the file, or the config.json field.

- `check_directory_files`: every file at the directory's top level is a regular file (a pipe
  would block the read for ever, a device never ends), reached through no link out of the
  directory (a Hub cache snapshot's links into its own `blobs/` excepted), and, unless it holds
  weights, at most `MAX_FILE_BYTES`.
- `check_safetensors`: a safetensors file's header says what the file holds: its length fits
  the file, each tensor's shape fits its byte range, the ranges tile the data without overlap
  or gap (what the safetensors reader raises on, as a traceback, when it does not).
- `check_config_numbers`: every number of config.json is finite, and the fields the converters
  divide by, take the root of or cap with are in range, before any code computes with them.

Nothing here imports torch or transformers."""

from __future__ import annotations

import json
import math
import os
import stat
import struct
from pathlib import Path
from typing import Any

from zoo.config.errors import ConfigError

# a tokenizer.json of a large vocabulary is tens of MiB; far above any, far below what would stall
MAX_FILE_BYTES = 256 * 2**20
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".gguf", ".onnx", ".ckpt")
MAX_HEADER_BYTES = 100_000_000  # the safetensors reader's own limit on a header

_KINDS = {
    stat.S_IFIFO: "a pipe",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def check_directory_files(directory: str | os.PathLike, name: str) -> None:
    """ConfigError, naming the file, for an entry at `directory`'s top level that is not a
    regular file inside it, or a file other than weights over `MAX_FILE_BYTES`. `name`: how the
    command names the directory (`init_from=hf:DIR`)."""
    directory = Path(directory)
    real = os.path.realpath(directory)
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as exc:
        raise ConfigError(f"{name}: the directory cannot be read ({exc.strerror or exc})") from None
    for entry in entries:
        path = Path(entry.path)
        try:
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                target = os.path.realpath(path)
                if not (_below(target, real) or _hub_blob(target, directory)):
                    raise ConfigError(
                        f"{name}: {entry.name} is a link out of the directory; zoo reads a model "
                        f"directory's files only inside it: copy the file there"
                    )
                if os.path.isdir(target):
                    continue
                mode = os.stat(path).st_mode
            elif stat.S_ISDIR(mode):
                continue  # the files save_pretrained writes are at the top level; zoo reads none below
            size = os.stat(path).st_size
        except OSError as exc:
            raise ConfigError(f"{name}: {entry.name} cannot be read ({exc.strerror or exc})") from None
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise ConfigError(
                f"{name}: {entry.name} is {kind}, not a regular file; zoo reads only regular "
                f"files from a model directory: replace it with the file or remove it"
            )
        if size > MAX_FILE_BYTES and not entry.name.endswith(WEIGHT_SUFFIXES):
            raise ConfigError(
                f"{name}: {entry.name} has {size:,} bytes, more than the {MAX_FILE_BYTES // 2**20} MiB "
                f"a model directory's config or tokenizer file is allowed; it is refused"
            )


def _below(target: str, root_real: str) -> bool:
    return target == root_real or target.startswith(root_real.rstrip(os.sep) + os.sep)


def _hub_blob(target: str, directory: Path) -> bool:
    """Is `target` a file of the Hub cache's `blobs/` beside the snapshot `directory`
    (models--ORG--NAME/snapshots/REV -> models--ORG--NAME/blobs/SHA)?"""
    snapshots = Path(os.path.realpath(directory)).parent
    if snapshots.name != "snapshots":
        return False
    return Path(target).parent == snapshots.parent / "blobs"


# safetensors dtype -> bits of one element
_DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}


def check_safetensors(file: str | os.PathLike, name: str) -> None:
    """ConfigError, naming the file, when the safetensors header of `file` does not describe
    its bytes (`name`: how the command names the directory)."""
    file = Path(file)

    def bad(what: str) -> ConfigError:
        return ConfigError(
            f"{name}: {file.name} is not a whole safetensors file ({what}); save the model again "
            f"or copy the file again from where it was made"
        )

    try:
        size = file.stat().st_size
        with open(file, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise bad(f"{size} bytes, shorter than the header's length")
            (length,) = struct.unpack("<Q", head)
            if length > min(size - 8, MAX_HEADER_BYTES):
                raise bad(f"its header length, {length:,} bytes, runs past the file's {size:,} bytes")
            text = f.read(length)
    except OSError as exc:
        raise ConfigError(f"{name}: {file.name} cannot be read ({exc.strerror or exc})") from None
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise bad("its header is not JSON") from None
    if not isinstance(header, dict):
        raise bad("its header is not a JSON object")
    data = size - 8 - length
    ranges = []
    for key, info in header.items():
        if key == "__metadata__":
            if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
                raise bad("its __metadata__ is not a mapping of strings")
            continue
        ranges.append((*_tensor_range(key, info, bad), key))
    end = 0
    for begin, stop, key in sorted(ranges):
        if begin != end:
            raise bad(f"tensor {key!r} begins at byte {begin:,} of the data, not at {end:,} (overlap or gap)")
        end = stop
    if end != data:
        raise bad(f"its tensors take {end:,} bytes and its data holds {data:,}")


def _tensor_range(key: str, info: Any, bad) -> tuple[int, int]:
    """(begin, end) of a header entry, checked against its dtype and shape."""
    if not isinstance(info, dict):
        raise bad(f"tensor {key!r} is described by a {type(info).__name__}")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if dtype not in _DTYPE_BITS:
        raise bad(f"tensor {key!r} has dtype {dtype!r}")
    if not isinstance(shape, list) or not all(_count(n) for n in shape):
        raise bad(f"tensor {key!r} has shape {shape!r}")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_count(n) for n in offsets):
        raise bad(f"tensor {key!r} has data_offsets {offsets!r}")
    begin, end = offsets
    if end < begin:
        raise bad(f"tensor {key!r} ends (byte {end:,}) before it begins ({begin:,})")
    bits = math.prod(shape) * _DTYPE_BITS[dtype]
    if (bits + 7) // 8 != end - begin:
        raise bad(
            f"tensor {key!r} of shape {shape} ({dtype}) needs {(bits + 7) // 8:,} bytes, its range holds {end - begin:,}"
        )
    return begin, end


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# config.json fields a converter computes with: each must be a number in this range when set
_POSITIVE_COUNTS = (
    "hidden_size",
    "n_embd",
    "d_model",
    "num_attention_heads",
    "n_head",
    "num_heads",
    "num_key_value_heads",
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "num_decoder_layers",
    "encoder_layers",
    "decoder_layers",
    "encoder_attention_heads",
    "decoder_attention_heads",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
    "intermediate_size",
    "n_inner",
    "d_ff",
    "d_kv",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
    "n_positions",
    "sliding_window",
    "relative_attention_num_buckets",
    "relative_attention_max_distance",
    "num_local_experts",
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "decoder_sparse_step",
)
_POSITIVE_NUMBERS = (
    "query_pre_attn_scalar",
    "attn_logit_softcapping",
    "final_logit_softcapping",
    "rope_theta",
    "rotary_emb_base",
    "factor",
    "rms_norm_eps",
    "layer_norm_eps",
    "layer_norm_epsilon",
    "norm_eps",
)
_FRACTIONS = ("partial_rotary_factor", "rotary_pct")  # in (0, 1]


def check_config_numbers(config: dict, name: str, where: str = "") -> None:
    """ConfigError naming the field for a number of config.json (`config`, nested mappings
    such as rope_scaling included) that is not finite, or a field of the lists above out of its
    range. `name`: the directory as the command names it."""
    for key, value in config.items():
        field = f"{where}{key}"
        if isinstance(value, dict):
            check_config_numbers(value, name, f"{field}.")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    check_config_numbers(item, name, f"{field}[{i}].")
                elif _number(item) and not math.isfinite(item):
                    raise ConfigError(
                        f"{name}: config.json field {field}[{i}] is {item}; a config field must be a finite number"
                    )
        elif _number(value):
            _check_field(key, field, value, name)


def _check_field(key: str, field: str, value: int | float, name: str) -> None:
    if not math.isfinite(value):
        raise ConfigError(f"{name}: config.json field {field} is {value}; a config field must be a finite number")
    if key in _POSITIVE_COUNTS and (not isinstance(value, int) or value < 1):
        raise ConfigError(f"{name}: config.json field {field} is {value!r}; it must be a whole number of at least 1")
    if key in _POSITIVE_NUMBERS and value <= 0:
        raise ConfigError(
            f"{name}: config.json field {field} is {value!r}; it must be greater than 0 (or null where it may be unset)"
        )
    if key in _FRACTIONS and not 0 < value <= 1:
        raise ConfigError(f"{name}: config.json field {field} is {value!r}; it must be in (0, 1]")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
