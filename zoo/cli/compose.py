"""`zoo.compose`: the same config `zoo-train` runs with, from Python."""

from __future__ import annotations

from typing import Iterable, Optional

from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from zoo.config.convert import as_model_config
from zoo.config.errors import ConfigError, explain
from zoo.config.paths import CONFIG_NAME, config_source
from zoo.config.store import register_configs



def _check_model(cfg: DictConfig) -> DictConfig:
    """The model section's own checks (`zoo.config.validate` checks the whole run)."""
    as_model_config(cfg.model)
    return cfg


def compose(overrides: Optional[Iterable[str]] = None, config_name: str = CONFIG_NAME, *,
            config_source_dir: Optional[str] = None, config_dirs: Iterable[str] = (),
            return_hydra_config: bool = False, check: bool = True) -> DictConfig:
    """Compose `conf/config.yaml` with Hydra command-line style overrides, e.g.
    `zoo.compose(["model=llama", "model/position=alibi", "model.d_model=256"])`, and validate it.
    With no overrides this is exactly what `zoo-train` runs with no arguments; `config_name`
    picks a recipe instead (`zoo.compose(config_name="numbers_seq2seq")` = `zoo-train -cn
    numbers_seq2seq`).

    As on the command line, `config_source_dir` replaces the primary config directory (`-cp`)
    and `config_dirs` are searched too (`-cd`). `return_hydra_config` keeps the `hydra:`
    section; `check=False` skips the model checks. The object names in the config are always
    checked against the allow-list of `zoo.config.targets`. With `init_from=hf:DIR` the model
    and tokenizer sections are DIR's (`zoo.interop.hf.init_from`)."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.config_search_path import SearchPathQuery
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from hydra.types import RunMode
    import yaml
    from omegaconf.errors import OmegaConfBaseException

    from zoo.cli.launch import register_resolvers
    from zoo.config.targets import check_config_targets

    register_configs()
    register_resolvers()
    overrides = list(overrides or [])
    primary = config_source_dir or config_source()
    if not primary.startswith("pkg://") and not primary.startswith("file://"):
        primary = f"file://{primary}"
    search_path = create_config_search_path(primary)
    for directory in config_dirs:  # where Hydra puts -cd: just before the structured configs
        search_path.prepend(provider="command-line", path=f"file://{Path(directory).resolve()}",
                            anchor=SearchPathQuery(provider="schema"))
    global_hydra = GlobalHydra.instance()
    saved = global_hydra.hydra if global_hydra.is_initialized() else None
    global_hydra.clear()  # inside a running Hydra app or hydra.initialize(): set aside, restored below
    try:
        hydra = Hydra.create_main_hydra2(task_name="train", config_search_path=search_path)
        cfg = hydra.compose_config(config_name, overrides, run_mode=RunMode.RUN)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(explain(exc)) from exc
    except yaml.YAMLError as exc:  # a config file that is not YAML
        where = getattr(exc, "problem_mark", None)
        place = f"{where.name}, line {where.line + 1}" if where is not None else "a config file"
        raise ConfigError(f"{place}: not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    except ValueError as exc:  # Hydra's defaults list, e.g. `model=true` (a bool, not an option name)
        if "Config group override" not in str(exc):
            raise ConfigError(explain(exc)) from exc
        bad = [o for o in overrides if "=" in o and "." not in o.split("=", 1)[0]]
        raise ConfigError(f"{explain(exc)} (in {' '.join(bad) or ' '.join(overrides)}); a config group "
                          f"takes an option name, e.g. model=gpt") from exc
    finally:
        global_hydra.clear()
        if saved is not None:
            global_hydra.initialize(saved)
    check_config_targets(cfg)
    if OmegaConf.select(cfg, "init_from", default=None) is not None:
        from zoo.interop.hf.init_from import apply_init_from  # loads torch: only for init_from=

        cfg = apply_init_from(cfg, overrides)
    if not return_hydra_config:
        with open_dict(cfg):
            del cfg["hydra"]
    return _check_model(cfg) if check else cfg
