"""The one reader of YAML files zoo did not write in this command: a `-cd`/`-cp` directory's
configs, a run's recorded `config.yaml`, `.hydra/config.yaml` and `overrides.yaml`, a sweep's
`multirun.yaml`. Each file is checked before OmegaConf or Hydra builds anything from it.

YAML's anchors and aliases (`a: &x [...]`, `b: [*x, *x]`) let a file of a few hundred bytes
name a tree of billions of values: PyYAML keeps an alias as a shared reference, but OmegaConf
copies every reference into its own node, and composing such a file never returns (the
"billion laughs"). zoo writes no alias into its own configs and records, so a file with one is
refused, on one line naming the file and the line, before it is expanded. The check reads the
parser's events only (no tree is built): its time grows with the file's length, never with
what an alias would expand to. A file over `MAX_BYTES` is refused the same way."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from zoo.config.errors import ConfigError

# a config or record of a run is a few KiB; this is far above any, and far below what would stall
MAX_BYTES = 16 * 1024 * 1024


class UnboundedYaml(ConfigError):
    """A YAML file refused before it is expanded: it holds an alias, or is over `MAX_BYTES`. (A
    reader that passes over a damaged record still stops here: reading it on would not end.)"""


def check_yaml_text(text: str, name: str) -> None:
    """Raise ConfigError (naming `name`) when `text` holds a YAML alias or is not YAML."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        for event in yaml.parse(io.StringIO(text), Loader=loader):
            if isinstance(event, yaml.AliasEvent):
                line = event.start_mark.line + 1 if event.start_mark is not None else "?"
                raise UnboundedYaml(
                    f"{name}, line {line}: a YAML alias (*{event.anchor}) is refused (an "
                    f"alias can expand to billions of values): write the value out"
                )
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        place = f"{name}, line {where.line + 1}" if where is not None else name
        raise ConfigError(f"{place}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None


def read_yaml_text(path: str | os.PathLike) -> str:
    """The text of a YAML file, checked (`check_yaml_text`); ConfigError for one that cannot be
    read, is too large, holds an alias or is not YAML."""
    path = Path(path)
    try:  # opened without blocking: a pipe planted at a config's name would wait for a writer
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ConfigError(f"{path}: not a regular file (a pipe, device or directory); give a YAML file")
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_BYTES:
        raise UnboundedYaml(f"{path}: a config file over {MAX_BYTES // 2**20} MiB is refused")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    check_yaml_text(text, str(path))
    return text


def load_yaml(path: str | os.PathLike) -> Any:
    """`OmegaConf.load(path)`, for a file checked first (`read_yaml_text`): the DictConfig or
    ListConfig it holds."""
    from omegaconf import OmegaConf

    return OmegaConf.load(io.StringIO(read_yaml_text(path)))


def check_config_dir(directory: str | os.PathLike) -> None:
    """Every YAML file Hydra could read from a config directory (`-cd`, `-cp`, a `file://` entry
    of `hydra.searchpath`), checked before Hydra composes from it. A directory that does not
    exist is left to Hydra to report."""
    root = Path(directory)
    if not root.is_dir():
        return
    seen = {os.path.realpath(root)}
    # Hydra follows a linked group directory, so the walk does too, once per real directory
    for folder, dirs, files in os.walk(root, followlinks=True):
        kept = []
        for d in sorted(d for d in dirs if not d.startswith(".")):
            real = os.path.realpath(os.path.join(folder, d))
            if real not in seen:
                seen.add(real)
                kept.append(d)
        dirs[:] = kept
        for name in sorted(files):
            if name.endswith((".yaml", ".yml")):
                read_yaml_text(Path(folder) / name)


def check_config_dirs(entries: Iterable[str]) -> None:
    """`check_config_dir` for each `file://` entry (or plain path) of a Hydra search path; a
    `pkg://` entry is zoo's own package (the others are refused before this)."""
    for entry in entries:
        text = str(entry)
        if text.startswith("pkg://"):
            continue
        check_config_dir(text[len("file://") :] if text.startswith("file://") else text)
