"""Where a run's trackers send it, read from its settings and the environment; no tracker
package or torch is imported, so a refused command answers before they load."""

from __future__ import annotations

import netrc
import os
from typing import Optional
from urllib.parse import urlparse

from zoo.config.schema.logger import MLflowConfig, WandbConfig, WandbMode


def mlflow_uri(settings: MLflowConfig) -> str:
    """logger.mlflow.tracking_uri, else $MLFLOW_TRACKING_URI, else MLflow's own default."""
    if settings.tracking_uri:
        return settings.tracking_uri
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    import mlflow

    return mlflow.get_tracking_uri()


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


def wandb_mode(settings: WandbConfig) -> Optional[str]:
    """The mode W&B is started in; None leaves it to $WANDB_MODE (auto, when it is set)."""
    if settings.mode != WandbMode.auto:
        return settings.mode.value
    if os.environ.get("WANDB_MODE"):
        return None
    return "online" if wandb_key_set() else "offline"
