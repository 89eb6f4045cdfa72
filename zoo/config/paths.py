"""Where the Hydra config tree lives: inside the installed package (`pkg://zoo.conf`, the
wheel ships the top-level conf/ there) or, in a source checkout, the conf/ beside zoo/."""

from __future__ import annotations

import importlib.util
from pathlib import Path

CONFIG_NAME = "config"


def config_source() -> str:
    """A Hydra config path: "pkg://zoo.conf" when installed, else an absolute directory."""
    try:
        if importlib.util.find_spec("zoo.conf") is not None:
            return "pkg://zoo.conf"
    except ModuleNotFoundError:
        pass
    checkout = Path(__file__).resolve().parents[2] / "conf"
    if (checkout / f"{CONFIG_NAME}.yaml").is_file():
        return str(checkout)
    raise RuntimeError("zoo's config files are missing; reinstall zoo with `pip install .`")
