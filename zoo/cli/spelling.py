"""A command line written as another tool would write it, answered with zoo's spelling on one
line: an argparse-style flag (`--max_steps=10`, `--max_steps 10`) with the override it stands
for, found among the config's keys (`trainer.max_steps=10`); a config group written with a dot
(`model.position=rope`) with its slash (`model/position=rope`); a comma list given to a single
run (`model/position=rope,alibi`) with the `-m` that makes it a sweep. Hydra's own answers to
these are a usage screen, a type error about a dataclass or a hint cut off after one line."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence

from zoo.config.errors import ConfigError
from zoo.config.facts.axes import AXES


def flag_words(argv: Sequence[str], unknown: Iterable[str]) -> list[tuple[str, str | None, str]]:
    """(flag, value, the words as written) for each word Hydra's parser does not know that starts with '-': its value
    after '=', else the next word when that is a bare value (`--max_steps 10`), else None."""
    unknown = [w for w in unknown if w.startswith("-") and len(w) > 1]
    found: list[tuple[str, str | None, str]] = []
    for word in unknown:
        name, eq, written = word.partition("=")
        value: str | None = written
        if not eq:
            at = argv.index(word)
            after = argv[at + 1] if at + 1 < len(argv) else None
            value = after if after is not None and "=" not in after and not after.startswith("-") else None
        found.append((name, value, word if eq or value is None else f"{word} {value}"))
    return found


def leaf_keys(cfg) -> list[str]:
    """Every dotted key of a composed config that holds a value (the `hydra` section left out)."""
    from omegaconf import OmegaConf

    keys: list[str] = []

    def walk(prefix: str, node) -> None:
        for key in node.keys():
            if prefix == "" and key == "hydra":
                continue
            child = node._get_node(key)
            name = f"{prefix}{key}"
            if OmegaConf.is_dict(child):
                walk(f"{name}.", child)
            else:
                keys.append(name)

    walk("", cfg)
    return keys


def flag_refusal(tool: str, flags: list[tuple[str, str | None, str]], keys: Sequence[str]) -> str:
    """The one line for argparse-style flags: zoo's overrides are KEY=VALUE words; each flag is
    matched to the keys whose name it is (`--max_steps` -> trainer.max_steps, `--trainer.max_steps`
    -> trainer.max_steps), or to the closest name."""
    fixes = []
    for flag, value, _ in flags:
        name = flag.lstrip("-").replace("-", "_")
        matches = [k for k in keys if k == name] or [k for k in keys if k.rsplit(".", 1)[-1] == name]
        if not matches:
            leaves = sorted({k.rsplit(".", 1)[-1] for k in keys})
            close = difflib.get_close_matches(name.rsplit(".", 1)[-1], leaves, n=1)
            matches = [k for k in keys if close and k.rsplit(".", 1)[-1] == close[0]]
        shown = value if value is not None else "VALUE"
        if matches:
            fixes.append(" or ".join(f"{k}={shown}" for k in matches[:3]))
    given = " ".join(written for _, _, written in flags)
    fix = f"write {' '.join(fixes)}" if len(fixes) == len(flags) else f"{tool} --help lists the keys"
    return f"{given}: {tool} takes KEY=VALUE overrides, not --flags; {fix}"


# the axes' keys: where a config group sets one of them (`model/norm_type=rmsnorm` is
# `model.norm_type=rmsnorm`), the dot is no misspelling
_FLAT_KEYS = frozenset(axis.key for axis in AXES)


def misspelled(
    overrides: Sequence[str], groups: Mapping[str, Sequence[str]] | Iterable[str], message: str
) -> ConfigError | None:
    """A clearer refusal of a composition Hydra refused, when an override is written another way
    than zoo's: a group with a dot for its slash, a group's option given to the key of the same
    name that does not take it (`model.attention=local_global`, an option of `model/attention`
    that sets several keys), or a comma list without -m. `groups`: the config groups, with their
    options where known. None otherwise."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    options: Mapping[str, Sequence[str]] = groups if isinstance(groups, Mapping) else dict.fromkeys(groups, ())
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # noqa: BLE001 - a syntax error: Hydra's own line says where
        return None
    for text, override in zip(overrides, parsed):
        key = override.get_key_element().lstrip("+~")
        slashed = key.replace(".", "/")
        value = text.split("=", 1)[1] if "=" in text else ""
        if "." in key and slashed in options and not override.is_sweep_override():
            if key not in _FLAT_KEYS:
                return ConfigError(f"{text}: {slashed} is a config group, chosen with a slash: {slashed}={value}")
            if value in options[slashed] and "Invalid value" in message and text in message:
                return ConfigError(
                    f"{text}: {value} is an option of the config group {slashed} (it sets more than {key}), "
                    f"chosen with a slash: {slashed}={value}"
                )
        if override.is_sweep_override() and "Ambiguous value" in message and text in message:
            return ConfigError(
                f"{text}: a comma list is a sweep: add -m to run one job per value (zoo-train -m {text})"
            )
    return None


def recipe_word(overrides: Sequence[str], tool: str = "zoo-train") -> ConfigError | None:
    """A bare word where an override goes (`zoo-train quick`), when it names a recipe (or nearly:
    `quik`, not `llama` for llama_small): the recipe is run with -cn. Hydra's own answer is "Error
    parsing override". None otherwise."""
    from zoo.config.paths import recipe_names

    for word in overrides:
        if "=" in word or word.startswith(("~", "+")):
            continue
        names = recipe_names()
        close = [word] if word in names else difflib.get_close_matches(word, names, n=1, cutoff=0.8)
        if close:
            return ConfigError(
                f"{word}: an override is KEY=VALUE; did you mean -cn {close[0]}? ({tool} -cn {close[0]} runs the recipe)"
            )
        groups = _groups_with_option(word)  # `zoo-train llama` for `zoo-train model=llama`
        if groups:
            meant = " or ".join(f"{group}={word}" for group in groups)
            return ConfigError(f"{word}: an override is KEY=VALUE; did you mean {meant}?")
    return None


def _groups_with_option(word: str) -> list[str]:
    """The config groups of zoo's own tree that have an option named `word` (model/llama.yaml:
    model), shortest first."""
    from zoo.config.paths import own_config_files

    return sorted(
        {
            name.rsplit("/", 1)[0]
            for name in own_config_files()
            if "/" in name and name.rsplit("/", 1)[1] == f"{word}.yaml"
        },
        key=lambda group: (group.count("/"), group),
    )
