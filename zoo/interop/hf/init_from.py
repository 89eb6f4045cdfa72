"""`init_from=hf:DIR`: fine-tune the weights of a Hugging Face model directory.

The weights fix the architecture and the vocabulary, so the composed config is rewritten:
- `model` becomes the composition of DIR's config.json (`zoo.interop.hf.pretrained`), keeping
  only the composed `model.dropout` (fine-tuning commonly sets it) and RoPE's context-extension
  rule where the command line sets it (`model.position.scaling=yarn model.position.scale=4`:
  fine-tuning past the pretrained length; `zoo.config.facts.rope.RUN_TIME_KEYS`);
- `tokenizer` becomes `tokenizer=hf tokenizer.path=DIR` (or the path the command line gives).

A command-line override that would change either is refused on one line, before anything is
read or written: `model=...`, `model/...=...`, `model.*` other than those kept, a
tokenizer other than hf, and `tokenizer.*` keys other than `tokenizer.path` /
`tokenizer.cache_dir`. Applying the rewrite twice gives the same config. The weights
themselves are loaded by the training run (`zoo.training.fit.fit_run`), unless it resumes from a zoo
checkpoint.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from zoo.config.errors import ConfigError
from zoo.config.facts.rope import RUN_TIME_KEYS
from zoo.config.records.hf_dir import check_directory_files
from zoo.config.schema.data import TokenizerConfig, TokenizerKind
from zoo.config.schema.model import ModelConfig
from zoo.config.schema.rope_rule import with_rope_rule
from zoo.config.schema.store import composed_node
from zoo.interop.hf.pretrained import model_config

PREFIX = "hf:"
KEPT_MODEL_KEYS = ("model.dropout", *(f"model.position.{key}" for key in RUN_TIME_KEYS))
HF_TOKENIZER_KEYS = ("tokenizer.path", "tokenizer.cache_dir")


def init_path(value: str) -> Path:
    """DIR of `init_from=hf:DIR`; ConfigError for another form."""
    if not isinstance(value, str) or not value.startswith(PREFIX) or not value[len(PREFIX) :]:
        raise ConfigError(
            f"init_from={value!r} is not allowed; use init_from=hf:DIR (a directory "
            f"written by a transformers model's save_pretrained)"
        )
    return Path(value[len(PREFIX) :]).expanduser()


def check_directory(path: Path) -> None:
    """ConfigError unless `path` is a directory holding a config.json."""
    if not path.is_dir():
        raise ConfigError(f"init_from=hf:{path}: no such directory")
    check_directory_files(path, f"init_from=hf:{path}")  # before any file of it is opened
    if not (path / "config.json").is_file():
        raise ConfigError(f"init_from=hf:{path}: no config.json there (a directory written by save_pretrained)")


def refuse_overrides(value: str, overrides: Iterable[str]) -> None:
    """ConfigError for a command-line override that init_from's weights contradict."""
    path = init_path(value)
    for text in overrides:
        key, _, choice = text.lstrip("+~").partition("=")
        if (key == "model" or key.startswith(("model.", "model/"))) and key not in KEPT_MODEL_KEYS:
            raise ConfigError(
                f"{text}: init_from={value} fixes the architecture (from {path}/config.json); "
                f"only model.dropout and RoPE's scaling rule (model.position.scaling, scale, ...) may be set"
            )
        if (key == "tokenizer" and choice != "hf") or (
            key.startswith(("tokenizer.", "tokenizer/")) and key not in HF_TOKENIZER_KEYS
        ):
            raise ConfigError(
                f"{text}: the model's vocabulary belongs to the tokenizer of init_from={value}; "
                f"leave the tokenizer unset (tokenizer=hf tokenizer.path={path} is used)"
            )


def apply_init_from(cfg, overrides: Iterable[str] = ()):
    """The composed `cfg` (a DictConfig) with `model` and `tokenizer` from init_from's
    directory; `cfg` itself when init_from is unset. `overrides`: the command line's."""
    from omegaconf import OmegaConf, open_dict

    value: str | None = OmegaConf.select(cfg, "init_from", default=None)
    if value is None:
        return cfg
    path = init_path(value)
    refuse_overrides(value, overrides)
    check_directory(path)
    model = dataclasses.replace(model_config(path), dropout=OmegaConf.select(cfg, "model.dropout", default=0.0))
    rule = [text.lstrip("+~") for text in overrides if text.lstrip("+~").startswith("model.position.")]
    if rule:  # RoPE's scaling rule from the command line, checked against the pretrained model
        model = ModelConfig(**with_rope_rule(model.to_dict(), rule, f"init_from={value}"))
    tokenizer = TokenizerConfig(
        kind=TokenizerKind.hf,
        path=OmegaConf.select(cfg, "tokenizer.path", default=None) or str(path),
        cache_dir=OmegaConf.select(cfg, "tokenizer.cache_dir", default=None),
    )
    with open_dict(cfg):  # typed nodes: a whole section is replaced by an instance of its schema
        cfg.model = composed_node(model)
        cfg.tokenizer = composed_node(tokenizer)
    return cfg
