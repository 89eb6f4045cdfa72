"""What zoo-train checks and decides before Hydra starts: the command line composes (each value
of a sweep), names no code outside the allow-list and no file outside its place, and the run
(or sweep) directory is chosen and claimed. Hydra then runs in the directory chosen here
(`dir_override`), and writes nothing before these checks have passed."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import InterpolationKeyError, OmegaConfBaseException

from zoo.cli.hydra_args import (
    HydraArgs,
    check_sweep_values,
    config_source_of,
    sweep_arms,
    sweep_variants,
    unknown_words,
)
from zoo.cli.spelling import recipe_word
from zoo.config.errors import ConfigError, explain
from zoo.config.paths import CONFIG_NAME
from zoo.config.safety.hydra_section import check_sweep_params

# zoo's own hydra.run.dir and hydra.sweep.dir (conf/config.yaml): the names zoo-train may change
# to runs/DATE/TIME-N when another run took them in the same second
DEFAULT_DIRS = {
    "run": "runs/${zoo.now:%Y-%m-%d}/${zoo.now:%H-%M-%S}",
    "sweep": "multirun/${zoo.now:%Y-%m-%d}/${zoo.now:%H-%M-%S}",
}


@dataclass(frozen=True)
class Checked:
    """A command line that composes: the composition of its run (a sweep: of one of its jobs,
    with the `hydra:` section), and whether it is a sweep."""

    cfg: DictConfig
    multirun: bool


def _plain(node) -> dict[str, Any]:
    """A config node as a plain mapping, its interpolations as written."""
    return cast(dict[str, Any], OmegaConf.to_container(node, resolve=False))


def check_control_characters(overrides: list[str]) -> None:
    """An override holding a line break or another control character is named whole (Hydra's
    parser answered `LexerNoViableAltException: ` and the override cut at the line break)."""
    for override in overrides:
        bad = next((c for c in override if ord(c) < 32 or ord(c) == 127), None)
        if bad is not None:
            raise ConfigError(
                f"the override {override!r} holds the control character {bad!r}; "
                f"an override is one line of printable text: remove it"
            )


def check_command_line(args: HydraArgs) -> Checked | None:
    """Compose before Hydra does, so that a bad key, value or combination is reported on one
    line (Hydra's own report spans several), and so that no config, whatever its origin, gets
    Hydra to build an object outside zoo's allow-list (a launcher, sweeper, callback or logging
    handler named `os.system`). A sweep, from the command line or `hydra.sweeper.params`, is
    checked once per value of each swept key. None for a command that runs nothing."""
    modes = [flag for flag, on in _modes(args) if on]
    if len(modes) > 1:  # Hydra's own rule, which it applies after the sweep directory is made
        raise ConfigError(f"{' and '.join(modes)}: give only one of --run, --multirun, --cfg, --info and -sc")
    if args.shell_completion:
        _check_shell_completion(args.overrides)
    if args.shell_completion or args.info:  # Hydra composes these itself: its files are checked first
        from zoo.cli.compose import check_config_files

        check_config_files(
            list(args.overrides),
            args.config_name or CONFIG_NAME,
            config_source_dir=config_source_of(args),
            config_dirs=[args.config_dir] if args.config_dir else [],
        )
    if args.shell_completion or args.info or args.version or args.unreadable:
        return None
    if args.experimental_rerun:
        raise ConfigError("--experimental-rerun is refused: it unpickles a file, and pickles can run code")
    check_control_characters(args.overrides)
    bare = recipe_word(args.overrides)  # `zoo-train quick` for `zoo-train -cn quick`
    if bare is not None:
        raise bare
    check_sweep_params(args.overrides)  # as typed, before a sweep's values are expanded
    check_sweep_values(args.overrides)  # before any is listed: range(1,inf) has no end
    from zoo.cli.compose import check_model, compose

    source = config_source_of(args)
    name = args.config_name or CONFIG_NAME
    dirs = [args.config_dir] if args.config_dir else []
    help_only = args.help or args.hydra_help

    made: dict[tuple[tuple[str, ...], bool], DictConfig] = {}  # a sweep's arms share compositions

    def composed(overrides: list[str], check: bool) -> DictConfig:
        key = (tuple(overrides), check)
        if key not in made:
            made[key] = compose(
                overrides,
                config_name=name,
                config_source_dir=source,
                config_dirs=dirs,
                return_hydra_config=True,
                check=check,
                command_line=args.overrides,
            )
        return made[key]

    first = sweep_variants(args.overrides)[0]  # the command line itself, when it sweeps nothing
    cfg = composed(first, check=False)
    multirun = args.multirun or str(OmegaConf.select(cfg, "hydra.mode", default="")) == "RunMode.MULTIRUN"
    params = OmegaConf.select(cfg, "hydra.sweeper.params", default=None)
    swept = [f"{key!s}={value}" for key, value in (_plain(params) if params is not None else {}).items()]
    sweeper = str(OmegaConf.select(cfg, "hydra.runtime.choices", default={}).get("hydra/sweeper"))
    check_sweep_values(swept + list(args.overrides), sweeper)
    for variant in sweep_variants(swept + list(args.overrides)):  # each value of each swept key
        job = cfg if variant == first else composed(variant, check=False)
        if multirun and not help_only and "launcher" in job.hydra:
            _resolve_launcher(job)
    if multirun and not help_only and not args.cfg:
        _refuse_if_no_arm_runs(swept + list(args.overrides), composed, sweeper)
    if not multirun:  # one run: exactly the composition Hydra will make
        if first != list(args.overrides):
            cfg = composed(args.overrides, check=False)
        if not (args.cfg or help_only):
            check_model(cfg)
    if args.cfg or help_only:
        return None
    return Checked(cfg, multirun)


# the arms of a sweep composed to find one that is a valid run, at most (each takes a composition)
ARMS_CHECKED = 32
UNKNOWN = "known only when Hydra runs the job"


def _refuse_if_no_arm_runs(overrides: list[str], composed, sweeper: str) -> None:
    """A sweep none of whose arms is a valid run (each breaks the same rule, e.g. `model.n_heads=3`
    with `model.d_model=100`) is refused on one line before anything is written, as the same
    command without -m is. A sweep with one valid arm runs; its other arms fail on their own
    (failed.json) while the rest go on. The arms are listed when they can be (`sweep_arms`: the
    sweeper's own merge, no interval or glob, at most ARMS_CHECKED of them); the first valid one
    ends the search, and so does one whose config reads what only Hydra's job knows
    (`${hydra:job.num}`)."""
    arms = sweep_arms(overrides, ARMS_CHECKED, sweeper)
    if arms is None:
        return
    first = None
    for arm in arms:
        problem = _why_not_a_run(arm, composed)
        if problem is None or problem == UNKNOWN:
            return
        first = first or problem
    if len(arms) == 1:
        raise ConfigError(f"the sweep's one arm is not a valid run: {first}")
    swept = [word for word, *others in zip(*arms) if any(o != word for o in others)]
    raise ConfigError(
        f"no arm of the sweep is a valid run: all {len(arms)} are refused (the first, {' '.join(swept)}): {first}"
    )


def _why_not_a_run(arm: list[str], composed) -> str | None:
    """The one-line refusal of the run `arm` composes to, None for a valid run, or UNKNOWN (the
    checks of its config alone: the data and machine are checked where each job runs)."""
    from zoo.config.errors import ZooError
    from zoo.config.schema.validate import validate

    try:
        cfg = composed(arm, check=False).copy()
        with open_dict(cfg):
            del cfg["hydra"]
        if "${hydra:" in OmegaConf.to_yaml(cfg, resolve=False):  # resolved in Hydra's job alone
            return UNKNOWN
        validate(cfg)
    except ZooError as exc:
        return str(exc)
    return None


SHELLS = ("bash", "zsh", "fish")  # Hydra's completion plugins


def _check_shell_completion(overrides: list[str]) -> None:
    """`-sc` takes one of install=SHELL, uninstall=SHELL and query=SHELL (what the shell runs at
    each Tab, with COMP_LINE set): anything else is one line here, not Hydra's traceback."""
    import os

    given = {word.split("=", 1)[0]: word.split("=", 1)[1] for word in overrides if "=" in word}
    commands = [key for key in ("install", "uninstall", "query") if key in given]
    setup = 'eval "$(zoo-train -sc install=bash)"'
    if len(commands) != 1:
        raise ConfigError(f"-sc takes one of install=SHELL, uninstall=SHELL, query=SHELL; to set it up: {setup}")
    shell = given[commands[0]]
    if shell not in SHELLS:
        raise ConfigError(f"-sc {commands[0]}={shell}: the shells are {', '.join(SHELLS)}")
    if commands[0] == "query" and "COMP_LINE" not in os.environ:
        raise ConfigError(
            f"-sc query={shell} is what the shell runs at each Tab (it reads COMP_LINE); to set it up: {setup}"
        )


def _modes(args: HydraArgs) -> list[tuple[str, bool]]:
    return [
        ("--run", args.run),
        ("--multirun", args.multirun),
        ("--cfg", args.cfg is not None),
        ("--info", args.info is not None),
        ("--shell-completion", args.shell_completion),
    ]


def configured_run_dir(cfg, mode: str = "run") -> tuple[Path, bool] | None:
    """(the run (or sweep) directory the config names, whether it is given explicitly). zoo's
    default (`DEFAULT_DIRS`, runs/DATE/TIME) is the only one renamed when taken; any other
    value, even one that reads the same, is the user's and is used as it is."""
    try:
        configured = OmegaConf.select(cfg, f"hydra.{mode}.dir")
        written = _plain(cfg.hydra)[mode]["dir"]
    except InterpolationKeyError as exc:  # names a key no config has: Hydra would fail with a traceback
        raise ConfigError(f"hydra.{mode}.dir: {explain(exc)}") from None
    except (OmegaConfBaseException, ValueError, KeyError, TypeError):
        return None
    if not configured:
        return None
    if "${" in str(configured):  # Hydra names its log file by interpolating the directory again
        raise ConfigError(
            f"hydra.{mode}.dir={configured!r} is refused: Hydra reads '${{' in a directory's name as an interpolation"
        )
    recorded = _plain(cfg.hydra.overrides)["hydra"]  # as written: ${hydra.job.num}
    overridden = any(o.startswith(f"hydra.{mode}.dir=") for o in recorded)
    return Path(configured), overridden or written != DEFAULT_DIRS[mode]


def _resolve_launcher(cfg) -> None:
    """The launcher's settings derive from the trainer (hydra/launcher=slurm): resolve them
    now, so that e.g. trainer.devices=auto fails here on one line, not after the launch."""
    launcher = cfg.hydra.launcher
    for key in launcher.keys():
        text = _plain(launcher)[key]
        if isinstance(text, str) and "${hydra" in text:
            continue  # resolved by Hydra when it runs
        try:
            launcher[key]
        except (OmegaConfBaseException, ValueError) as exc:
            raise ConfigError(f"hydra.launcher.{key}: {explain(exc)}") from None


def claim_single(checked: Checked, shared: bool):
    """The single run's claim, made once before Hydra writes into its directory (`zoo.run.preflight`):
    refused on one line with nothing written for a config, data, machine or directory mistake.
    The default runs/DATE/TIME taken by a run started in the same second becomes
    runs/DATE/TIME-N; `ckpt_path=last` without a directory finds the run it continues. main()
    gives Hydra the claim's directory (hydra.run.dir), and Lightning gives it to the ranks it
    starts."""
    from zoo.run.preflight import check, claim_run, latest_run

    where = configured_run_dir(checked.cfg)
    if where is None:
        return None
    run_dir, explicit = where
    cfg = checked.cfg.copy()
    with open_dict(cfg):
        del cfg["hydra"]
    spec = check(cfg)  # before torch and Lightning load: a refusal answers in under a second
    fresh = not explicit and not shared
    if fresh and spec.ckpt_path == "last":
        run_dir, fresh = latest_run(spec, run_dir.parent.parent), False
        print(f"zoo-train: ckpt_path=last resumes {run_dir}", file=sys.stderr)
    return claim_run(cfg, run_dir, lock=True, rename_if_taken=fresh, spec=spec)


def claim_sweep(checked: Checked, shared: bool) -> Path | None:
    """The sweep's directory: two sweeps started in the same second get one each (each job
    locks its own directory when it runs). A sweep run again in its directory is refused when
    a link there leads out of it: Hydra writes each job's `.hydra/` before the job starts."""
    from zoo.config.records.links import check_tree
    from zoo.run.lock import claim_default

    where = configured_run_dir(checked.cfg, "sweep")
    if where is None:
        return None
    sweep_dir, explicit = where
    if not explicit and not shared:
        try:
            sweep_dir = claim_default(sweep_dir)
        except OSError as exc:
            raise ConfigError(f"sweep directory {sweep_dir}: {exc.strerror or exc}") from None
    check_tree(sweep_dir)
    return sweep_dir


def dir_override(mode: str, path: Path) -> str:
    """`hydra.MODE.dir=PATH` as an override Hydra reads back as PATH (quoted: a comma would make a
    sweep of it, `${` an interpolation)."""
    text = str(path).replace("'", "\\'").replace("${", "\\${")
    return f"hydra.{mode}.dir='{text}'"


JOB_SUBDIR = "${zoo.job_subdir:"


def subdir_override(cfg: DictConfig) -> str:
    """`hydra.sweep.subdir="${zoo.job_subdir:'SUBDIR'}"`, SUBDIR the sweep's own (as written, with
    its interpolations): Hydra resolves it for each job, then makes the job's directory, and zoo's
    resolver refuses one that lies outside the sweep directory first (a key SUBDIR reads may
    hold `../..` in one arm, or only as Hydra's job resolves it)."""
    written = str(_plain(cfg.hydra.sweep)["subdir"])
    guarded = written if written.startswith(JOB_SUBDIR) else JOB_SUBDIR + _quoted(written, "'") + "}"
    # in double quotes: Hydra records the override's text in hydra.overrides.hydra, where
    # OmegaConf reads it as a string that may hold interpolations (single quotes would break it)
    return "hydra.sweep.subdir=" + _quoted(guarded, '"')


def _quoted(text: str, quote: str) -> str:
    """`text` in `quote`s, read back as `text` by Hydra's override parser and by OmegaConf's
    resolver arguments: a backslash escapes only a quote (or the closing quote) in both."""
    text = re.sub(rf"(\\*){quote}", lambda m: m.group(1) * 2 + "\\" + quote, text)
    text = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, text)
    return f"{quote}{text}{quote}"


def refuse_flags(argv: list[str], args: HydraArgs) -> None:
    """An argparse-style flag (`--max_steps=10`) is refused on one line naming the override it
    stands for, before anything loads or is written (Hydra would ignore it, make the run
    directory, then print its usage screen)."""
    from zoo.cli.spelling import flag_refusal, flag_words, leaf_keys

    flags = flag_words(argv, unknown_words(argv))
    if not flags:
        return
    from zoo.cli.compose import compose

    try:
        keys = leaf_keys(
            compose(
                [],
                config_name=args.config_name or CONFIG_NAME,
                config_source_dir=config_source_of(args),
                config_dirs=[args.config_dir] if args.config_dir else [],
                check=False,
            )
        )
    except ConfigError:
        keys = []
    raise ConfigError(flag_refusal("zoo-train", flags, keys))
