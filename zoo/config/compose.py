"""`zoo.compose`: the same config `zoo-train` runs with, from Python."""

from __future__ import annotations

from typing import Iterable, Optional

from omegaconf import DictConfig

from zoo.config.convert import as_model_config
from zoo.config.errors import ConfigError, explain
from zoo.config.paths import CONFIG_NAME, config_source
from zoo.config.store import register_configs



def validate(cfg: DictConfig) -> DictConfig:
    """Run the cross-field checks of the schemas; raises `ConfigError`."""
    as_model_config(cfg.model)
    return cfg


def compose(overrides: Optional[Iterable[str]] = None, config_name: str = CONFIG_NAME) -> DictConfig:
    """Compose `conf/config.yaml` with Hydra command-line style overrides, e.g.
    `zoo.compose(["model=llama", "model/position=alibi", "model.d_model=256"])`, and validate it.
    With no overrides this is exactly what `zoo-train` runs with no arguments; `config_name`
    picks a recipe instead (`zoo.compose(config_name="numbers_seq2seq")` = `zoo-train -cn
    numbers_seq2seq`)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    register_configs()
    overrides = list(overrides or [])
    try:
        if GlobalHydra.instance().is_initialized():
            return validate(hydra_compose(config_name, overrides=overrides))
        source = config_source()
        if source.startswith("pkg://"):
            init = initialize_config_module(source[len("pkg://"):], version_base="1.3")
        else:
            init = initialize_config_dir(source, version_base="1.3")
        with init:
            cfg = hydra_compose(config_name, overrides=overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(explain(exc)) from exc
    except ValueError as exc:  # Hydra's defaults list, e.g. `model=true` (a bool, not an option name)
        bad = [o for o in overrides if "=" in o and "." not in o.split("=", 1)[0]]
        raise ConfigError(f"{explain(exc)} (in {' '.join(bad) or ' '.join(overrides)}); a config group "
                          f"takes an option name, e.g. model=gpt") from exc
    return validate(cfg)
