"""`zoo-train --help`: the config groups and their options, the recipes, and every key of the
config, at the value it has with the command line's recipe and overrides, with its type and the
help text of its schema field (`zoo.config.schema.root.ZooConfig` and the section schemas). Hydra's
own flags stay under `--hydra-help`."""

from __future__ import annotations

import dataclasses
import textwrap
import typing

from zoo.cli.tool import Section, help_text, wrap

TOOL = "zoo-train"
USAGE = (
    f"{TOOL} [-cn RECIPE] [GROUP=OPTION ...] [KEY=VALUE ...] [+KEY=VALUE ...] "
    f"[-m (sweep: KEY=A,B ...)] [--cfg job] [--hydra-help]"
)
LISTED_HYDRA_GROUPS = ("hydra/launcher",)  # the Hydra groups zoo ships options for


def train_help(argv: list[str], about: str) -> str:
    """The help text for `zoo-train ARGV --help` (`about`: what the tool is, its docstring); a
    ConfigError when the overrides do not compose."""
    from omegaconf import OmegaConf

    from zoo.cli.compose import compose, config_groups
    from zoo.cli.hydra_args import config_source_of, parse_hydra_args, sweep_variants
    from zoo.config.paths import CONFIG_NAME, recipe_names
    from zoo.config.schema.root import ZooConfig

    args = parse_hydra_args(argv)
    source = config_source_of(args)
    dirs = [args.config_dir] if args.config_dir else []
    overrides = sweep_variants(list(args.overrides))[0]  # a sweep: its first job
    cfg = compose(
        overrides,
        config_name=args.config_name or CONFIG_NAME,
        config_source_dir=source,
        config_dirs=dirs,
        return_hydra_config=True,
        check=False,
    )
    choices = {k: v for k, v in cfg.hydra.runtime.choices.items() if v is not None}
    values = typing.cast(dict, OmegaConf.to_container(cfg, resolve=False))  # a composed config: a mapping
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
    groups = config_groups(source, dirs, LISTED_HYDRA_GROUPS)
    lines = [
        f"  {g}{'=' + choices[g] if g in choices else ''}  [{' | '.join(options)}]" for g, options in groups.items()
    ]
    recipes = wrap(f"recipes (-cn NAME): {', '.join(recipe_names())}", indent="  ")
    intro = [
        textwrap.dedent(about).strip(),
        "",
        "config groups (GROUP=OPTION picks the file OPTION.yaml of the group; shown: the option in "
        "use, [the options]):",
        *lines,
        "",
        *recipes,
        "",
        "keys (KEY=VALUE; shown: the value in use, [its type or choices], its help):",
    ]
    return help_text(USAGE, "\n".join(intro), sections, [f"Hydra's own flags: {TOOL} --hydra-help"])
