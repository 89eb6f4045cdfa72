"""`zoo-train --help`: the config groups and their options, the recipes, and every key of the
config, at the value it has with the command line's recipe and overrides, with its type and the
help text of its schema field (`zoo.config.root.ZooConfig` and the section schemas). Hydra's
own flags stay under `--hydra-help`."""

from __future__ import annotations

import dataclasses
import textwrap
import typing
from pathlib import Path
from typing import Iterable, Optional

from zoo.cli.tool import Section, help_text, wrap

TOOL = "zoo-train"
USAGE = (f"{TOOL} [-cn RECIPE] [GROUP=OPTION ...] [KEY=VALUE ...] [+KEY=VALUE ...] "
         f"[-m (sweep: KEY=A,B ...)] [--cfg job] [--hydra-help]")
LISTED_HYDRA_GROUPS = ("hydra/launcher",)  # the Hydra groups zoo ships options for


def train_help(argv: list[str]) -> str:
    """The help text for `zoo-train ARGV --help`; a ConfigError when the overrides do not compose."""
    from hydra._internal.utils import get_args_parser
    from omegaconf import OmegaConf

    import zoo.cli.train as train
    from zoo.cli.compose import compose
    from zoo.config.paths import CONFIG_NAME, recipe_names
    from zoo.config.root import ZooConfig

    args, _ = get_args_parser().parse_known_args(argv)
    source = None
    if args.config_path:  # as Hydra resolves -cp: relative to the application's module
        source = args.config_path if args.config_path.startswith("pkg://") else \
            str((Path(train.__file__).parent / args.config_path).resolve())
    dirs = [args.config_dir] if args.config_dir else []
    overrides = train._sweep_variants(list(args.overrides))[0]  # a sweep: its first job
    cfg = compose(overrides, config_name=args.config_name or CONFIG_NAME, config_source_dir=source,
                  config_dirs=dirs, return_hydra_config=True, check=False)
    choices = {k: v for k, v in cfg.hydra.runtime.choices.items() if v is not None}
    values = OmegaConf.to_container(cfg, resolve=False)
    values.pop("hydra", None)

    sections, run_keys = [], []
    hints = typing.get_type_hints(ZooConfig)
    for f in dataclasses.fields(ZooConfig):
        if dataclasses.is_dataclass(hints[f.name]) or f.name == "trainer":
            title = f"{f.name} ({f.name}={choices[f.name]})" if f.name in choices else f.name
            if f.name == "trainer":
                title = f"{title[:-1]}; Lightning's Trainer arguments, +trainer.NAME=VALUE adds one)"
            sections.append(Section(title, ZooConfig, values=values, keys=(f.name,)))
        else:
            run_keys.append(f.name)
    sections.append(Section("the run", ZooConfig, values=values, keys=tuple(run_keys)))
    groups = config_groups(source, dirs)
    lines = [f"  {g}{'=' + choices[g] if g in choices else ''}  [{' | '.join(options)}]"
             for g, options in groups.items()]
    recipes = wrap(f"recipes (-cn NAME): {', '.join(recipe_names())}", indent="  ")
    intro = [textwrap.dedent(train.__doc__).strip(), "",
             "config groups (GROUP=OPTION picks the file OPTION.yaml of the group; shown: the option in "
             "use, [the options]):", *lines, "", *recipes,
             "", "keys (KEY=VALUE; shown: the value in use, [its type or choices], its help):"]
    return help_text(USAGE, "\n".join(intro), sections, [f"Hydra's own flags: {TOOL} --hydra-help"])


def config_groups(source: Optional[str], dirs: Iterable[str]) -> dict[str, list[str]]:
    """Every config group of the search path (zoo's own and hydra/launcher) -> its options."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.config_search_path import SearchPathQuery
    from hydra.core.global_hydra import GlobalHydra

    from zoo.config.paths import config_source

    primary = source or config_source()
    if not primary.startswith(("pkg://", "file://")):
        primary = f"file://{primary}"
    search_path = create_config_search_path(primary)
    for directory in dirs:
        search_path.prepend(provider="command-line", path=f"file://{Path(directory).resolve()}",
                            anchor=SearchPathQuery(provider="schema"))
    global_hydra = GlobalHydra.instance()
    saved = global_hydra.hydra if global_hydra.is_initialized() else None
    global_hydra.clear()
    try:
        hydra = Hydra.create_main_hydra2(task_name="train", config_search_path=search_path)
        names = [g for g in hydra.list_all_config_groups()
                 if not g.startswith("hydra") or g in LISTED_HYDRA_GROUPS]
        return {g: sorted(hydra.config_loader.get_group_options(g)) for g in sorted(names)}
    finally:
        global_hydra.clear()
        if saved is not None:
            global_hydra.initialize(saved)
