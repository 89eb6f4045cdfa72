"""Registration of the schemas in Hydra's ConfigStore.

`conf/config.yaml` lists `zoo_config` first in its defaults, so every YAML file merged after it
is checked against the dataclasses: an unknown key or enum value fails at compose time with the
key and the allowed values in the message.
"""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from zoo.config.schema.root import ZooConfig

_registered = False


def register_configs() -> None:
    global _registered
    if _registered:
        return
    ConfigStore.instance().store(name="zoo_config", node=ZooConfig)
    _registered = True
