"""Pretrained Hugging Face weights as the start of a zoo run (`zoo-train init_from=hf:DIR`).

    cfg = model_config(DIR)                  # the zoo ModelConfig of DIR's config.json
    model, hf_config = load_pretrained(DIR)  # a zoo model with DIR's weights (same logits)
    skipped = load_weights(task.model, DIR)  # into the model a task built from model_config(DIR)

DIR is a directory written by a transformers model's `save_pretrained` (config.json plus
weights). The transformers class that reads the weights follows the config's model_type
(`AUTO_CLASSES`); the converter of `zoo.interop.hf.CONVERTERS` maps them onto zoo's names.
Every failure is a one-line `ConfigError` naming `init_from`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zoo.config.errors import ConfigError
from zoo.config.records.hf_dir import check_config_numbers, check_directory_files, check_safetensors
from zoo.interop.hf import CONVERTERS, UnsupportedConfig, from_hf

# model_type -> the transformers Auto class whose model has the head the converter reads
AUTO_CLASSES = {
    "llama": "AutoModelForCausalLM",
    "gpt2": "AutoModelForCausalLM",
    "bert": "AutoModelForMaskedLM",
    "t5": "AutoModelForSeq2SeqLM",
    "bart": "AutoModelForSeq2SeqLM",
    "qwen3": "AutoModelForCausalLM",
    "gemma2": "AutoModelForCausalLM",
    "olmo2": "AutoModelForCausalLM",
    "gpt_neox": "AutoModelForCausalLM",
    "mixtral": "AutoModelForCausalLM",
    "olmoe": "AutoModelForCausalLM",
    "qwen3_moe": "AutoModelForCausalLM",
    "deepseek_v3": "AutoModelForCausalLM",
    "qwen3_next": "AutoModelForCausalLM",
}


def supported() -> list[str]:
    """model_types with both a converter and an Auto class."""
    return [kind for kind in AUTO_CLASSES if kind in CONVERTERS]


def model_type(path: str | Path) -> str:
    """The model_type of DIR/config.json; ConfigError for a missing, unreadable or unsupported one."""
    config = Path(path) / "config.json"
    name = f"init_from=hf:{path}"
    if Path(path).is_dir():
        check_directory_files(path, name)  # no pipe, device or link out: nothing below blocks or leaves DIR
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
        kind = data.get("model_type")
    except FileNotFoundError:
        raise ConfigError(f"{name}: no config.json there (a directory written by save_pretrained)") from None
    except (OSError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{name}: config.json is not a JSON object ({type(exc).__name__})") from None
    check_config_numbers(data, name)
    if kind not in supported():
        raise ConfigError(f"{name}: model_type {kind!r} is not supported; supported: {', '.join(supported())}")
    return kind


def read_config(path: str | Path):
    """`transformers.AutoConfig.from_pretrained(DIR)`, offline, after the model_type check."""
    model_type(path)
    transformers = _transformers()
    try:
        return transformers.AutoConfig.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"init_from=hf:{path}: transformers cannot read config.json ({_first(exc)})") from None


SAFETENSORS = ("model.safetensors", "model.safetensors.index.json")  # one file, or the index of shards
PICKLED = ("pytorch_model.bin", "pytorch_model.bin.index.json")  # torch.save's pickles


def check_weights(path: str | Path, *, needed: bool = True) -> None:
    """DIR holds safetensors weights, the format that is read as data. Pickled weights
    (pytorch_model.bin) are never opened: unpickling a file someone sent can run code. Refused
    on one line saying what to do; with needed=False (the config is read, the weights may not
    be: a resumed run takes its checkpoint's) only a directory whose weights are pickled."""
    directory = Path(path)
    if any((directory / name).is_file() for name in SAFETENSORS):
        return
    name = f"init_from=hf:{path}"
    pickled = [n for n in PICKLED if (directory / n).is_file()]
    if pickled:
        raise ConfigError(
            f"{name}: its weights are {pickled[0]}, a pickle, which zoo never unpickles (a pickle can "
            f"run code); convert them to model.safetensors where you trust the file, e.g. "
            f"AutoModel.from_pretrained(DIR).save_pretrained(DIR, safe_serialization=True)"
        )
    if needed:
        raise ConfigError(f"{name}: no model.safetensors there (the weights save_pretrained writes)")


def check_weight_files(path: str | Path) -> None:
    """The safetensors files transformers will read (model.safetensors, or the shards its index
    names: plain file names of DIR), each with a header that describes its bytes."""
    directory, name = Path(path), f"init_from=hf:{path}"
    index = directory / SAFETENSORS[1]
    if not index.is_file():
        check_safetensors(directory / SAFETENSORS[0], name)
        return
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
    except (OSError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{name}: {index.name} is not a JSON object ({type(exc).__name__})") from None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ConfigError(f"{name}: {index.name} has no weight_map of tensor names to files")
    for shard in sorted(set(weight_map.values())):
        if Path(shard).name != shard or shard in (".", "..") or not (directory / shard).is_file():
            raise ConfigError(f"{name}: {index.name} names {shard!r}, which is not a file of the directory")
        check_safetensors(directory / shard, name)


def _safetensors_error() -> type[BaseException]:
    """safetensors' own error (raised by its reader past zoo's checks), or one nothing raises."""
    try:
        from safetensors import SafetensorError
    except ImportError:
        return ConfigError
    return SafetensorError


def model_config(path: str | Path):
    """The zoo `ModelConfig` that DIR's weights fit (dropout 0, as the converters give it)."""
    check_weights(path, needed=False)  # before any data is prepared
    config = read_config(path)
    try:
        return CONVERTERS[config.model_type].zoo_config(config)
    except UnsupportedConfig as exc:
        raise ConfigError(f"init_from=hf:{path}: {exc}") from None


def load_pretrained(path: str | Path) -> tuple[Any, Any]:
    """(zoo model with DIR's weights in float32, in eval mode; the transformers config)."""
    import torch

    kind = model_type(path)
    check_weights(path)
    check_weight_files(path)
    transformers = _transformers()
    auto = getattr(transformers, AUTO_CLASSES[kind])
    bars = transformers.utils.logging
    shown = bars.is_progress_bar_enabled()
    bars.disable_progress_bar()  # one log line says what was loaded, not a progress bar
    try:
        hf_model = auto.from_pretrained(
            str(path), local_files_only=True, dtype=torch.float32, use_safetensors=True, trust_remote_code=False
        )
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, _safetensors_error()) as exc:
        raise ConfigError(f"init_from=hf:{path}: transformers cannot load the weights ({_first(exc)})") from None
    finally:
        if shown:
            bars.enable_progress_bar()
    try:
        model = from_hf(hf_model)
    except UnsupportedConfig as exc:
        raise ConfigError(f"init_from=hf:{path}: {exc}") from None
    return model, hf_model.config


def load_weights(model, path: str | Path) -> list[str]:
    """Copy DIR's weights into `model` (built from `model_config(DIR)`, possibly by a task that
    removed the output head). Every parameter of `model` is loaded; returns the converted keys
    it has no place for (e.g. the LM head under a classifier)."""
    pretrained, _ = load_pretrained(path)
    state = pretrained.state_dict()
    own = model.state_dict()
    missing = [key for key in own if key not in state]
    if missing:
        raise ConfigError(f"init_from=hf:{path}: the weights do not fill {', '.join(missing[:5])}")
    for key, value in own.items():
        if value.shape != state[key].shape:
            raise ConfigError(
                f"init_from=hf:{path}: {key} has shape {tuple(state[key].shape)}, "
                f"the model expects {tuple(value.shape)}"
            )
    model.load_state_dict({key: state[key] for key in own}, strict=True)
    return [key for key in state if key not in own]


def _transformers():
    try:
        import transformers
    except ImportError:
        raise ConfigError(
            "init_from=hf:... needs transformers: install the hf extra, pip install '.[hf]' in zoo's source directory"
        ) from None
    return transformers


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].rstrip(":") if text else type(exc).__name__
