"""Where a run's trackers send it, read from its settings and the environment; no tracker
package or torch is imported, so a refused command answers before they load."""

from __future__ import annotations

import netrc
import os
from pathlib import Path
from urllib.parse import urlparse

from zoo.config.safety.trackers import DEFAULT_STORE, artifacts_in_run, store_in_run
from zoo.config.schema.logger import MLflowConfig, WandbConfig, WandbMode


def mlflow_uri(settings: MLflowConfig, run_dir: str | Path | None = None) -> str:
    """logger.mlflow.tracking_uri, else $MLFLOW_TRACKING_URI, else a sqlite store in the run
    directory; a store named relative (sqlite:///NAME.db) lies in `run_dir`
    (`zoo.config.safety.trackers`: a config places no store outside the run)."""
    if settings.tracking_uri:
        uri = settings.tracking_uri
    elif os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    else:
        uri = DEFAULT_STORE
    return store_in_run(uri, run_dir) if run_dir is not None else uri


def mlflow_artifacts(settings: MLflowConfig, run_dir: str | Path) -> str | None:
    """Where a new experiment in a store of the run directory keeps its artifacts: beside the
    store, in the run (MLflow's default is ./mlruns in the working directory); None for a
    server or the environment's store (their own default)."""
    if not settings.tracking_uri and os.environ.get("MLFLOW_TRACKING_URI"):
        return None
    return artifacts_in_run(settings.tracking_uri or DEFAULT_STORE, run_dir)


def wandb_key_set() -> bool:
    """Whether W&B has an API key here: WANDB_API_KEY, or `wandb login`'s entry in ~/.netrc."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname or "api.wandb.ai"
    try:
        return netrc.netrc(os.environ.get("NETRC")).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def wandb_online(settings: WandbConfig) -> bool:
    """Whether W&B will run online: the setting, or with mode=auto, $WANDB_MODE or a key."""
    mode = wandb_mode(settings)
    return mode == "online" or (mode is None and os.environ.get("WANDB_MODE", "").lower() in ("online", "run"))


def wandb_mode(settings: WandbConfig) -> str | None:
    """The mode W&B is started in; None leaves it to $WANDB_MODE (auto, when it is set)."""
    if settings.mode != WandbMode.auto:
        return settings.mode.value
    if os.environ.get("WANDB_MODE"):
        return None
    return "online" if wandb_key_set() else "offline"
