"""Registration of the schemas in Hydra's ConfigStore.

`conf/config.yaml` lists `zoo_config` first in its defaults, so every YAML file merged after it
is checked against the dataclasses: an unknown key or enum value fails at compose time with the
key and the allowed values in the message. What is registered are the schemas' unfrozen twins
(`thawed_schema`): a composition takes overrides, the validated config does not.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, field, fields, is_dataclass, make_dataclass
from typing import Any, get_type_hints

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from zoo.config.schema.root import ZooConfig

_registered = False
_TWINS: dict[type, type] = {}
_PREFIX = "Thawed"  # a twin's name in this module, before its schema's


def register_configs() -> None:
    global _registered
    if _registered:
        return
    node = OmegaConf.structured(thawed_schema(ZooConfig))
    ConfigStore.instance().store(name="zoo_config", node=node)
    _registered = True


def thawed_schema(schema: type, made: dict[type, type] | None = None) -> type:
    """The twin Hydra composes against of the frozen dataclass `schema`: the same name, fields,
    types, defaults and help, its sections twins too, not frozen and without checks.

    OmegaConf makes the node of a frozen dataclass read-only, each time a merge creates one (a
    section left ??? until its group's file is merged), so the validated schemas themselves
    would refuse every override; `zoo.config.schema.validate` checks the composition against
    them afterwards."""
    made = _TWINS if made is None else made  # one twin per schema: a node typed with it takes no other
    if schema in made:
        return made[schema]
    hints = get_type_hints(schema)
    specs: list[tuple[str, Any, Any]] = []
    for f in fields(schema):
        kind = hints[f.name]
        if is_dataclass(kind) and isinstance(kind, type):
            kind = thawed_schema(kind, made)
        if f.default_factory is not MISSING:
            factory = f.default_factory
            if is_dataclass(factory) and isinstance(factory, type):
                factory = thawed_schema(factory, made)
            spec = field(default_factory=factory, metadata=f.metadata)
        elif f.default is not MISSING:
            spec = field(default=f.default, metadata=f.metadata)
        else:
            spec = field(metadata=f.metadata)
        specs.append((f.name, kind, spec))
    twin = make_dataclass(schema.__name__, specs, kw_only=True)
    # the schema's name in messages ("not in 'ModelConfig'"); a name of its own in this module for
    # pickle, so a sweep's job process (which unpickles Hydra's composed nodes) finds this twin
    # again rather than the frozen schema
    twin.__doc__, twin.__module__, twin.__qualname__ = schema.__doc__, __name__, _PREFIX + schema.__name__
    if any(other.__qualname__ == twin.__qualname__ for other in made.values()):
        raise TypeError(f"two schemas are named {schema.__name__}: their twins need names of their own")
    made[schema] = twin
    return twin


def __getattr__(name: str) -> type:
    """A twin by the name pickle recorded (`ThawedModelConfig`): made again in a process that
    unpickles a composed node before composing anything."""
    if name.startswith(_PREFIX):
        thawed_schema(ZooConfig)  # every section's twin
        for twin in _TWINS.values():
            if twin.__qualname__ == name:
                return twin
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def composed_node(section: Any) -> DictConfig:
    """A validated section (an instance of a frozen schema) as the node a composition holds: its
    twin's typed node with its values, so a whole section replaced in a composed config (e.g.
    init_from's model) takes the checks and overrides of the one Hydra composed."""
    node = OmegaConf.merge(OmegaConf.structured(thawed_schema(type(section))), asdict(section))
    assert isinstance(node, DictConfig)
    return node
