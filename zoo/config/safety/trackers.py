"""Where a run's experiment tracker writes: inside the run, unless a server is named on the
command line.

MLflow creates what `logger.mlflow.tracking_uri` names: `sqlite:////elsewhere/x.db` makes a
database anywhere the user can write, a `file:` URI a directory tree, and a server URL in a
config file from elsewhere sends the run's config and metrics to that server. So the setting
takes two forms only:

- `http://HOST[:PORT]` or `https://...`, a tracking server, when the command line names it
  (`logger.mlflow.tracking_uri=URL`, one of a sweep's values included); a config file, a recipe
  or a sweep's `hydra.sweeper.params` cannot;
- `sqlite:///NAME.db`, a relative path without `..`: a store in the run directory
  (`store_in_run`), its artifacts beside it.

Left null, the store is `$MLFLOW_TRACKING_URI` (the user's own environment), else
`sqlite:///mlflow.db` in the run directory. W&B and TensorBoard write only under the run
directory (`wandb/`, `tb/`): no setting moves them, and `hydra.job.env_set` cannot set their
variables (`zoo.config.safety.environment`)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from zoo.config.errors import ConfigError

KEY = "logger.mlflow.tracking_uri"
SQLITE = "sqlite:///"
DEFAULT_STORE = "sqlite:///mlflow.db"  # in the run directory
ARTIFACTS = "mlartifacts"  # a store's artifacts, in the run directory beside it
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def named_servers(overrides: Iterable[str]) -> set[str]:
    """The values `overrides` (single-valued override lists' entries) give KEY."""
    named = set()
    for override in overrides:
        key, _, value = override.partition("=")
        if key.lstrip("+~") == KEY:
            named.add(value[1:-1] if value[:1] == value[-1:] and value[:1] in ("'", '"') else value)
    return named


def check_tracking_uri(uri: Any, named: Collection[str]) -> None:
    """ConfigError, on one line, for a tracking URI that is neither a server named on the command
    line (`named`) nor a store in the run directory; None (the default) passes."""
    if uri is None:
        return
    text = str(uri)
    if _CONTROL.search(text):
        raise ConfigError(f"{KEY}={text!r} is refused: a URI on one line is expected")
    scheme = text.split(":", 1)[0].lower() if ":" in text else ""
    if scheme in ("http", "https"):
        parts = urlsplit(text)
        try:
            _ = parts.port  # read for its check: a port that is not a number raises
        except ValueError:
            raise ConfigError(f"{KEY}={text} is refused: its port is not a number from 0 to 65535") from None
        if not parts.hostname:
            raise ConfigError(f"{KEY}={text} is refused: a server URL names its host (http://HOST:PORT)")
        if text not in named:
            raise ConfigError(
                f"{KEY}={text} is refused: a tracking server is named on the command line "
                f"({KEY}={text}), never by a config file (it would receive the run's config and "
                f"metrics)"
            )
        return
    if store_path(text) is None:
        raise ConfigError(
            f"{KEY}={text} is refused: a tracker's store lies in the run directory "
            f"({SQLITE}NAME.db, a relative path without '..'), or a server is named on the "
            f"command line ({KEY}=http://HOST:PORT)"
        )


def store_path(uri: str) -> str | None:
    """The relative path of a `sqlite:///PATH` store inside the run directory, else None."""
    if not uri.startswith(SQLITE):
        return None
    rel = uri[len(SQLITE) :]
    path = PurePosixPath(rel)
    if not rel.strip() or path.is_absolute() or ".." in path.parts or "?" in rel or "\\" in rel:
        return None
    return rel


def store_in_run(uri: str, run_dir: str | Path) -> str:
    """`uri` with a relative sqlite store made absolute inside `run_dir`; any other unchanged."""
    rel = store_path(uri)
    return f"{SQLITE}{(Path(run_dir).resolve() / rel).as_posix()}" if rel is not None else uri


def artifacts_in_run(uri: str, run_dir: str | Path) -> str | None:
    """Where an experiment created in a store of `run_dir` keeps its artifacts (`mlartifacts/`
    beside the store), as MLflow takes it; None for a server (its own default)."""
    if store_path(uri) is None:
        return None
    return (Path(run_dir).resolve() / ARTIFACTS).as_uri()
