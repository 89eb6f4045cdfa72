"""Registration of the schemas in Hydra's ConfigStore.

`conf/config.yaml` lists `zoo_config` first in its defaults, so every YAML file merged after it
is checked against the dataclasses: an unknown key or enum value fails at compose time with the
key and the allowed values in the message.
"""

from __future__ import annotations

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from zoo.config.schema.root import ZooConfig

_registered = False


def register_configs() -> None:
    global _registered
    if _registered:
        return
    node = OmegaConf.structured(ZooConfig)
    OmegaConf.set_readonly(node, False)  # the validated ZooConfig is frozen; its composition takes overrides
    ConfigStore.instance().store(name="zoo_config", node=node)
    _registered = True
