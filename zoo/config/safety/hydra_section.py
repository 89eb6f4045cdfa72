"""Hydra's own section (`hydra:`) is closed: a key may differ from zoo's own composition only if
`HYDRA_KEYS` lists it as a setting, and then its value is checked.

Hydra reads its section to decide where files go (`hydra.run.dir`, `output_subdir`, the log
files), what code runs (callbacks, launchers, the search path's `pkg://` packages) and what the
job's environment holds (`env_set`, `env_copy`). A config from elsewhere, a recipe, `-cd DIR` or
an override could otherwise write or truncate files outside the run, import a package, or copy a
secret into `.hydra/hydra.yaml`. So every leaf of the composed `hydra` node is compared with the
one zoo's own config gives for the same Hydra group choices (`reference`); each difference must
fall under a rule here:

- `Rule.SETTING`: a user may set it; `check_hydra_section` checks the value, after interpolation
  where it can be resolved before Hydra runs.
- `Rule.ZOO`: zoo's own value; any change is refused.
- `Rule.HYDRA`: filled in by Hydra as it composes or runs (`runtime`, `overrides`, the job's name,
  number and id); a config or override that sets it is refused.

A key no rule covers is refused: a Hydra upgrade that adds a key cannot add an unchecked way in
(tests/config/safety/test_hydra_section.py walks Hydra's schema against this table)."""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

from zoo.config.errors import ConfigError
from zoo.config.safety.plugins import RULE, SHIPPED, listed


class Rule(enum.Enum):
    SETTING = "a setting: its value is checked"
    ZOO = "zoo's own value"
    HYDRA = "filled in by Hydra"


# the options of Hydra's config groups a run may choose (`hydra/launcher=slurm`)
HYDRA_GROUPS: dict[str, tuple[str | None, ...]] = {  # None: the group left empty (null)
    **{group: tuple(options) for group, options in SHIPPED.items()},  # sweepers, launchers: one rule
    "hydra/job_logging": ("default",),
    "hydra/hydra_logging": ("default",),
    "hydra/help": ("default",),
    "hydra/hydra_help": ("default",),
    "hydra/output": ("default",),
    "hydra/env": ("default",),
    "hydra/callbacks": (None,),
}

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # a newline in an #SBATCH line starts a shell line
_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG", "NOTSET")


def _text(path: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, (str, int, float)) or isinstance(value, bool) or _CONTROL.search(str(value)):
        raise ConfigError(f"{path}={value!r} is refused: a plain value on one line is expected")


def _count(path: str, value: Any) -> None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return
    raise ConfigError(f"{path}={value!r} is refused: a whole number of at least 0 is expected")


def _positive(path: str, value: Any) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return
    raise ConfigError(f"{path}={value!r} is refused: a whole number of at least 1 is expected")


def _flag(path: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{path}={value!r} is refused: true or false")


def _directory(path: str, value: Any) -> None:
    _text(path, value)
    if value is None or not str(value).strip():
        raise ConfigError(f"{path} is refused: a directory is expected, got {value!r}")


def inside(path: str, value: Any, base: str) -> None:
    """A relative path with no `..`: it stays inside `base`."""
    _text(path, value)
    text = str(value)
    if not text or PurePosixPath(text).is_absolute() or ".." in PurePosixPath(text).parts:
        raise ConfigError(
            f"{path}={text!r} is refused: it must name a directory inside {base} (a relative path without '..')"
        )


SUBDIR = "hydra.sweep.subdir"
_SWEEP_DIR = "the sweep directory (hydra.sweep.dir)"


def _subdir(path: str, value: Any) -> None:
    inside(path, value, _SWEEP_DIR)


def job_subdir(resolved: Any, written: str | None = None) -> str:
    """A job's directory below its sweep directory as Hydra names it: `hydra.sweep.subdir` after
    interpolation (a key it reads may hold `../..`), returned as text when it is a relative path
    without `..` and without `${` (Hydra names each job's log file by interpolating its directory
    again); ConfigError, on one line naming hydra.sweep.subdir, otherwise. `zoo.compose` checks a
    sweep's first job before anything is written, and the `${zoo.job_subdir:...}` resolver
    (`zoo.run.resolvers`) each job's, as Hydra makes its directory."""
    text = "" if resolved is None else str(resolved)
    _text(SUBDIR, resolved)
    if "${" in text:
        raise ConfigError(f"{SUBDIR}={text!r} is refused: Hydra reads '${{' in a directory's name as an interpolation")
    if text and not PurePosixPath(text).is_absolute() and ".." not in PurePosixPath(text).parts:
        return text
    given = f"{SUBDIR}={written!r} resolves to {text!r}" if written not in (None, text) else f"{SUBDIR}={text!r}"
    raise ConfigError(
        f"{given}: a job's directory must lie inside {_SWEEP_DIR}; give {SUBDIR} a relative path "
        f"without '..', e.g. {SUBDIR}=${{hydra.job.num}}"
    )


def _submitit_folder(path: str, value: Any) -> None:
    prefix = "${hydra.sweep.dir}/"
    text = str(value)
    if not text.startswith(prefix):
        raise ConfigError(f"{path}={text!r} is refused: submitit's files lie in the sweep directory ({prefix}NAME)")
    inside(path, text[len(prefix) :], _SWEEP_DIR)


def _mode(path: str, value: Any) -> None:
    if str(value).rsplit(".", 1)[-1] not in ("RUN", "MULTIRUN") and value is not None:
        raise ConfigError(f"{path}={value!r} is refused: RUN or MULTIRUN")


def _level(path: str, value: Any) -> None:
    if (isinstance(value, int) and not isinstance(value, bool)) or str(value).upper() in _LEVELS:
        return
    raise ConfigError(f"{path}={value!r} is refused: a log level ({', '.join(_LEVELS)})")


def _verbose(path: str, value: Any) -> None:
    names = value if isinstance(value, (list, tuple)) else [value]
    for name in names:
        if not isinstance(name, (bool, str)) or (isinstance(name, str) and not re.fullmatch(r"[\w.]+", name)):
            raise ConfigError(f"{path}={value!r} is refused: true, or logger names")


def check_searchpath(path: str, value: Any) -> None:
    entries = value if isinstance(value, (list, tuple)) else [value]
    for entry in entries:
        text = str(entry)
        if text.startswith("file://") and text[len("file://") :].strip():
            continue
        if text == "pkg://zoo" or text.startswith("pkg://zoo.") or text == "pkg://hydra_plugins.zoo_recipes":
            continue
        raise ConfigError(
            f"{path} entry {text!r} is refused: the search path takes file://DIRECTORY and zoo's "
            f"own packages (pkg://zoo...); pkg:// imports the package it names"
        )


def _job_name(path: str, value: Any) -> None:
    # Lightning's launcher names its ranks' jobs train_ddp_process_N; a name is one plain word
    if not isinstance(value, str) or not re.fullmatch(r"\w+", value):
        raise ConfigError(f"{path}={value!r} is refused: a job name is one word of letters, digits and _")


def _no_hydra_files(path: str, value: Any) -> None:
    # null (no .hydra/ files) is what Lightning's launcher gives the ranks after the first
    if value is not None:
        raise ConfigError(f"{path}={value!r} is refused: Hydra's files go to the run's .hydra/ (null: none)")


def _sweep_param(path: str, value: Any) -> None:
    _text(path, value)  # each value becomes an override, composed and checked like one


def _refuse(reason: str) -> Callable[[str, Any], None]:
    def refuse(path: str, value: Any) -> None:
        raise ConfigError(f"{path} is refused: {reason}")

    return refuse


_SBATCH_TEXT = (
    "partition",
    "account",
    "qos",
    "comment",
    "constraint",
    "exclude",
    "gres",
    "mem_per_gpu",
    "mem_per_cpu",
    "name",
)
_SBATCH_COUNTS = (
    "timeout_min",
    "cpus_per_task",
    "gpus_per_node",
    "tasks_per_node",
    "nodes",
    "mem_gb",
    "cpus_per_gpu",
    "gpus_per_task",
    "signal_delay_s",
    "max_num_timeout",
    "array_parallelism",
)
_SHELL = (
    "the job's shell lines come from the environment zoo-train is started in (sbatch passes it on), never from a config"
)

# key patterns (fnmatch, on dotted paths) -> (rule, the check of a SETTING); the first match rules
HYDRA_KEYS: dict[str, tuple[Rule, Callable[[str, Any], None] | None]] = {
    "hydra.run.dir": (Rule.SETTING, _directory),
    "hydra.sweep.dir": (Rule.SETTING, _directory),
    "hydra.sweep.subdir": (Rule.SETTING, _subdir),
    "hydra.mode": (Rule.SETTING, _mode),
    "hydra.verbose": (Rule.SETTING, _verbose),
    "hydra.searchpath": (Rule.SETTING, check_searchpath),
    "hydra.sweeper.params": (Rule.SETTING, None),  # empty: no sweep
    "hydra.sweeper.params.*": (Rule.SETTING, _sweep_param),
    "hydra.sweeper.max_batch_size": (Rule.SETTING, _count),
    # hydra/sweeper=optuna: how many trials, how many asked at a time, and the sampler's seed (a replay)
    "hydra.sweeper.n_trials": (Rule.SETTING, _positive),
    "hydra.sweeper.n_jobs": (Rule.SETTING, _positive),
    "hydra.sweeper.study_name": (Rule.SETTING, _text),
    "hydra.sweeper.sampler.seed": (Rule.SETTING, _count),
    "hydra.sweeper.sampler.n_startup_trials": (Rule.SETTING, _count),
    "hydra.sweeper.storage": (
        Rule.SETTING,
        _refuse("a storage URL writes a database anywhere or reaches a server; the trials are the sweep's runs"),
    ),
    # zoo's (the catch-all below): custom_search_space names a function Hydra would import and
    # call; search_space is given as hydra.sweeper.params, whose values are checked as overrides
    "hydra.sweeper*": (Rule.ZOO, None),
    **{f"hydra.launcher.{key}": (Rule.SETTING, _text) for key in _SBATCH_TEXT},
    **{f"hydra.launcher.{key}": (Rule.SETTING, _count) for key in _SBATCH_COUNTS},
    "hydra.launcher.stderr_to_stdout": (Rule.SETTING, _flag),
    "hydra.launcher.submitit_folder": (Rule.SETTING, _submitit_folder),
    "hydra.launcher.setup": (Rule.SETTING, _refuse(_SHELL)),
    "hydra.launcher.srun_args": (Rule.SETTING, _refuse(_SHELL)),
    "hydra.launcher.additional_parameters*": (
        Rule.SETTING,
        _refuse("sbatch parameters outside hydra.launcher's named keys could place files and commands anywhere"),
    ),
    "hydra.launcher*": (Rule.ZOO, None),
    "hydra.job_logging.root.level": (Rule.SETTING, _level),
    "hydra.job_logging.loggers.*.level": (Rule.SETTING, _level),
    "hydra.hydra_logging.root.level": (Rule.SETTING, _level),
    "hydra.hydra_logging.loggers.*.level": (Rule.SETTING, _level),
    "hydra.job_logging*": (Rule.ZOO, None),  # handlers, files, formats: zoo's
    "hydra.hydra_logging*": (Rule.ZOO, None),
    "hydra.job.env_set.*": (Rule.SETTING, None),  # names and values: zoo.config.safety.targets
    "hydra.job.env_set": (Rule.SETTING, None),
    "hydra.job.env_copy*": (Rule.ZOO, None),  # would copy the environment into .hydra/hydra.yaml
    "hydra.job.chdir": (Rule.ZOO, None),
    "hydra.job.config.*": (Rule.ZOO, None),
    "hydra.job.name": (Rule.SETTING, _job_name),
    "hydra.job.override_dirname": (Rule.HYDRA, None),
    "hydra.job.id": (Rule.HYDRA, None),
    "hydra.job.num": (Rule.HYDRA, None),
    "hydra.job.config_name": (Rule.HYDRA, None),
    "hydra.runtime*": (Rule.HYDRA, None),
    "hydra.overrides*": (Rule.HYDRA, None),
    "hydra.output_subdir": (Rule.SETTING, _no_hydra_files),
    "hydra.callbacks*": (Rule.ZOO, None),  # a callback is code Hydra runs
    "hydra.help*": (Rule.ZOO, None),
    "hydra.hydra_help*": (Rule.ZOO, None),
    "hydra.env*": (Rule.ZOO, None),
    "hydra.defaults*": (Rule.ZOO, None),  # group choices: HYDRA_GROUPS
}


def rule_of(path: str) -> tuple[Rule, Callable[[str, Any], None] | None] | None:
    """The rule for the dotted key `path` (None: no rule, refused)."""
    for pattern, rule in HYDRA_KEYS.items():
        if fnmatch.fnmatchcase(path, pattern):
            return rule
    return None


def leaves(node: Any, path: str = "hydra") -> dict[str, Any]:
    """Every leaf of a plain (to_container) mapping by dotted path; an empty mapping is a leaf."""
    if isinstance(node, Mapping):
        if not node:
            return {path: {}}
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(leaves(value, f"{path}.{key}"))
        return out
    return {path: node}


_ABSENT = object()


def check_group_choices(choices: Mapping[str, Any]) -> None:
    for group, options in HYDRA_GROUPS.items():
        choice = choices.get(group)
        if group in choices and choice not in options:
            shown = ", ".join(str(o) for o in options if o is not None) or "none"
            if group in SHIPPED:
                shown = f"{listed(group)}: {RULE}"
            raise ConfigError(f"{group}={choice} is refused: zoo runs with {group} {shown}")
    for group in choices:
        if str(group).startswith("hydra/") and group not in HYDRA_GROUPS:
            raise ConfigError(f"{group}={choices[group]} is refused: not a Hydra group zoo runs with")


def check_hydra_overrides(overrides: Iterable[str]) -> None:
    """The command line's overrides of Hydra's section, before Hydra reads them: a key that is not
    a setting, or a Hydra group option zoo does not run with, is refused on one line."""
    check_sweep_params(overrides)
    for override in overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~")
        if key.startswith("hydra/"):
            check_group_choices({key.split("@", 1)[0]: value or None})
        elif key == "hydra" or key.startswith("hydra."):
            setting_check(key)


SWEEP_PARAMS = "hydra.sweeper.params"


def check_sweep_params(overrides: Iterable[str]) -> None:
    """`hydra.sweeper.params.KEY=VALUES` is refused on one line that gives the override meant. Hydra
    reads the dots of KEY as nesting (a search space's keys are dotted names: `model.d_model`)
    and cannot add a key to params that hold null (the sweeper's own, without a recipe's); on the
    command line a swept key is an override of its own, which the sweeper merges with a recipe's
    params. zoo-train checks its words as typed, before a sweep's values are expanded."""
    for override in overrides:
        key, _, value = override.partition("=")
        if key.lstrip("+~").startswith(f"{SWEEP_PARAMS}."):
            swept = key.lstrip("+~")[len(SWEEP_PARAMS) + 1 :]
            raise ConfigError(
                f"{override}: on the command line a sweep's key is an override of its own: -m {swept}={value} "
                f"({SWEEP_PARAMS} is a recipe's mapping of KEY: VALUES)"
            )


def setting_check(path: str) -> Callable[[str, Any], None] | None:
    """The check of the setting `path`; ConfigError, on one line, when `path` is no setting."""
    rule = rule_of(path)
    if rule is None:
        raise ConfigError(f"{path} is refused: not a Hydra setting zoo allows ({allowed()})")
    kind, check = rule
    if kind is Rule.ZOO:
        raise ConfigError(f"{path} is refused: it is zoo's own setting and cannot be changed ({allowed()})")
    if kind is Rule.HYDRA:
        raise ConfigError(f"{path} is refused: Hydra fills it in")
    return check


def differences(given: Mapping[str, Any], reference: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    """(path, given value) of every leaf of `given` that `reference` does not have or has with
    another value, and (path, _ABSENT) of a leaf of `reference` that `given` lacks."""
    mine, theirs = leaves(given), leaves(reference)
    for path, value in mine.items():
        if value == {} and any(p.startswith(path + ".") for p in theirs):
            continue  # emptied: its leaves below are reported
        if theirs.get(path, _ABSENT) != value:
            yield path, value
    for path in theirs:
        if path not in mine and not any(p.startswith(path + ".") for p in mine):
            yield path, _ABSENT


def check_hydra_section(given: Mapping[str, Any], reference: Mapping[str, Any]) -> None:
    """ConfigError, on one line, for a Hydra group option zoo does not run with, or the first key
    of `given` (the composed `hydra` node, as a plain unresolved mapping) that differs from
    `reference` (zoo's own composition with the same Hydra group choices) without being a
    setting, or whose value its check refuses. The command line's overrides are checked before
    Hydra reads them (`check_hydra_overrides`)."""
    check_group_choices((given.get("runtime") or {}).get("choices") or {})
    for path, value in differences(
        given,
        {
            **reference,
            "runtime": given.get("runtime"),
            "overrides": given.get("overrides"),
            "job": {
                **(reference.get("job") or {}),
                **{k: (given.get("job") or {}).get(k) for k in ("override_dirname", "config_name", "id", "num")},
            },
        },
    ):
        check = setting_check(path)
        if check is not None and value is not _ABSENT:
            check(path, value)


def allowed() -> str:
    """The settings a config may change, for messages."""
    return (
        "the settings are hydra.run.dir, hydra.sweep.dir, hydra.sweep.subdir, hydra.mode, hydra.verbose, "
        "hydra.searchpath, hydra.sweeper.params, the Optuna sweeper's n_trials, n_jobs, study_name, "
        "sampler.seed and sampler.n_startup_trials, the SLURM keys of hydra.launcher, log levels and "
        "hydra.job.env_set"
    )
