"""The command line of a Hydra application (`zoo-train`), read the way Hydra reads it: its
flags (`-m`, `-cn`, `-cd`, `-cp`, `--cfg`, `--info`, ...) and its overrides. zoo reads it
before Hydra starts, to check and claim the run; Hydra then reads the same words itself.
tests/cli/test_hydra_args.py holds this parser against Hydra's own."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

INFO_CHOICES = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


@dataclass(frozen=True)
class HydraArgs:
    """What a Hydra command line asks for; `overrides` are its KEY=VALUE words in order."""

    overrides: list[str] = field(default_factory=list)
    help: bool = False
    hydra_help: bool = False
    cfg: str | None = None  # --cfg job|hydra|all: print the config, run nothing
    resolve: bool = False
    package: str | None = None
    run: bool = False
    multirun: bool = False
    shell_completion: bool = False
    config_path: str | None = None  # -cp
    config_name: str | None = None  # -cn
    config_dir: str | None = None  # -cd
    experimental_rerun: str | None = None
    info: str | None = None
    version: bool = False
    unreadable: bool = False  # a flag Hydra will refuse (e.g. --cfg other): Hydra says so itself

    @property
    def runs_nothing(self) -> bool:
        """A command that only prints (help, config, info, version, shell completion)."""
        return bool(
            self.help
            or self.hydra_help
            or self.cfg
            or self.info
            or self.shell_completion
            or self.version
            or self.unreadable
        )


class _Unreadable(Exception):
    pass


class _QuietParser(argparse.ArgumentParser):
    """Raises instead of printing a usage line and exiting: Hydra reports the mistake."""

    def error(self, message: str):
        raise _Unreadable(message)


def _parser() -> argparse.ArgumentParser:
    parser = _QuietParser(add_help=False, exit_on_error=False)
    parser.add_argument("overrides", nargs="*")
    for flags in (
        ("--help", "-h"),
        ("--hydra-help",),
        ("--resolve",),
        ("--run", "-r"),
        ("--multirun", "-m"),
        ("--shell-completion", "-sc"),
    ):
        parser.add_argument(*flags, action="store_true")
    parser.add_argument("--version", action="store_true")
    parser.add_argument("--cfg", "-c", choices=["job", "hydra", "all"])
    parser.add_argument("--package", "-p")
    parser.add_argument("--config-path", "-cp")
    parser.add_argument("--config-name", "-cn")
    parser.add_argument("--config-dir", "-cd")
    parser.add_argument("--experimental-rerun")
    parser.add_argument("--info", "-i", const="all", nargs="?", choices=INFO_CHOICES)
    return parser


def config_source_of(args: HydraArgs) -> str | None:
    """The primary config directory -cp names, as Hydra resolves it (a pkg:// source, or a
    path relative to the application's module, zoo/cli/); None without -cp."""
    if not args.config_path:
        return None
    if args.config_path.startswith("pkg://"):
        return args.config_path
    return str((Path(__file__).parent / args.config_path).resolve())


def parse_hydra_args(argv: list[str]) -> HydraArgs:
    """`argv` (without the program name) as Hydra reads it. A command line Hydra's parser would
    refuse is `unreadable` (nothing is checked or claimed; Hydra refuses it on its own), and a
    word this parser cannot place is skipped, as Hydra's `parse_known_args` does."""
    try:
        args, _ = _parser().parse_known_args(argv)
    except (argparse.ArgumentError, _Unreadable):  # e.g. --cfg other: Hydra refuses it itself
        return HydraArgs(unreadable=True)
    return HydraArgs(**vars(args))


def unknown_words(argv: list[str]) -> list[str]:
    """The words of `argv` Hydra's parser places nowhere (it ignores them, then refuses the
    command line after the run directory is made), e.g. an argparse-style `--max_steps=10`."""
    try:
        return _parser().parse_known_args(argv)[1]
    except (argparse.ArgumentError, _Unreadable):
        return []


def in_one_group(argv: list[str]) -> list[str]:
    """`argv` (the program name first) with every KEY=VALUE word in one group, in the order they
    were written. Hydra's parser takes one group and refuses an override after a later flag
    (`a=1 -cn quick b=2`), and Lightning's launcher writes just that for the ranks it starts of a
    command that ends in a flag: it adds `hydra.run.dir=...` at the end."""
    apart = [word for word in unknown_words(argv[1:]) if not word.startswith("-")]
    if not apart:
        return list(argv)
    words = list(argv[1:])
    for word in reversed(apart):  # each after the group: its last occurrence
        del words[len(words) - 1 - words[::-1].index(word)]
    return with_overrides([argv[0], *words], parse_hydra_args(words), apart)


def with_overrides(argv: list[str], args: HydraArgs, extra: list[str]) -> list[str]:
    """`argv` (the program name first) with the overrides `extra` placed where Hydra reads them:
    right after the command line's own group of KEY=VALUE words, or at the end when it has none.
    Hydra's parser takes one group of overrides; a word after a later flag (`a=1 -cn quick b=2`)
    it refuses."""
    words, group = argv[1:], list(args.overrides)
    for i in range(len(words) - len(group) + 1) if group else ():
        if words[i : i + len(group)] == group:
            at = 1 + i + len(group)
            return [*argv[:at], *extra, *argv[at:]]
    return [*argv, *extra]


def _parsed(overrides: list[str]) -> list | None:
    """`overrides` as Hydra's override parser reads them; None for a syntax error, which compose
    reports on one line."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_overrides(overrides)
    except Exception:  # noqa: BLE001 - any of the parser's errors
        return None


def sweep_variants(overrides: list[str]) -> list[list[str]]:
    """Single-valued override lists that together use every value of every swept key: the
    first value of each sweep, then each other value in turn. An interval (the Optuna sweeper's
    search space) stands for its two ends; a glob, which needs Hydra's loader, is left out of
    the check."""
    parsed = _parsed(overrides)
    if parsed is None:
        return [overrides]
    choices = []
    for text, o in zip(overrides, parsed):
        if o.is_sweep_override():
            key = o.get_key_element()
            try:
                values = [f"{key}={v}" for v in o.sweep_string_iterator()]
            except Exception:  # noqa: BLE001 - glob(...) / interval(...) need Hydra's loader
                values = [f"{key}={v}" for v in _interval_ends(o)]
                if not values:
                    continue
            choices.append(values or _range_start(o) or [text])
        else:
            choices.append([text])
    first = [c[0] for c in choices]
    variants = [first]
    for i, values in enumerate(choices):
        for v in values[1:]:
            variants.append(first[:i] + [v] + first[i + 1 :])
    return variants


def sweep_arms(overrides: list[str], limit: int, sweeper: str = "basic") -> list[list[str]] | None:
    """Every arm of the sweep `overrides` describe (a sweeper's params first, then the command
    line's), as single-valued override lists: the product of the swept keys' values, the first
    values first, merged as `sweeper` merges them. Hydra's basic sweeper: a key given twice takes
    its later values, in place. Optuna's: a search space of choices only (a range includes its
    upper end there, and is a distribution), and a key given a fixed value anywhere is fixed.
    None when the arms cannot all be listed: another sweeper, an interval, glob or Optuna's
    range, or more than `limit` arms."""
    import itertools

    parsed = _parsed(overrides)
    if sweeper not in ("basic", "optuna") or parsed is None:
        return None
    by_key: dict[str, list[str]] = {}  # in the order first given
    fixed: set[str] = set()
    for text, o in zip(overrides, parsed):
        key = o.get_key_element()
        if not o.is_sweep_override():
            by_key[key] = [text]
            fixed.add(key)
            continue
        if sweeper == "optuna" and not o.is_choice_sweep():
            return None  # a distribution, not a list
        try:
            values = [f"{key}={v}" for v in o.sweep_string_iterator()]
        except Exception:  # noqa: BLE001 - an interval or glob: its values are not a list
            return None
        if sweeper == "optuna" and key in fixed:
            continue  # Optuna keeps a fixed value out of its search space, wherever it stands
        by_key[key] = values
        fixed.discard(key)
    choices = list(by_key.values())
    count = 1
    for values in choices:
        count *= len(values)
    if not 0 < count <= limit:
        return None
    return [list(arm) for arm in itertools.product(*choices)]


def check_sweep_values(overrides: list[str], sweeper: str | None = None) -> None:
    """A sweep's values as the sweeper will read them, refused on one line naming the override
    (the sweeper would fail with its own error, or none, after the sweep directory is made): an
    interval's or range's ends and step, and a choice's numbers, are finite (`interval(nan,1)`); an
    interval runs from low to high, and one tagged `log` from above 0; a range's step is not 0 and
    a range holds a value (Optuna's `sweeper` reads `range(LOW,HIGH)` with HIGH included, Hydra's
    basic one as Python's range; without `sweeper`, not checked). Runs before any value of a sweep
    is listed: an infinite range has no end to list."""
    import math

    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep

    from zoo.config.errors import ConfigError

    for text, override in zip(overrides, _parsed(overrides) or []):
        value = override.value() if override.is_sweep_override() else None
        numbers: list[float | int | None]
        if isinstance(value, ChoiceSweep):
            numbers = [v for v in value.list if isinstance(v, float)]
        elif isinstance(value, IntervalSweep):
            numbers = [value.start, value.end]
        elif isinstance(value, RangeSweep):
            numbers = [value.start, value.stop, value.step]
        else:
            continue
        bad = next((n for n in numbers if isinstance(n, float) and not math.isfinite(n)), None)
        if bad is not None:
            raise ConfigError(f"{text}: a sweep's values are finite numbers, got {bad}")
        if isinstance(value, IntervalSweep):
            _check_interval(text, value)
        elif isinstance(value, RangeSweep):
            _check_range(text, value, sweeper)


def _check_interval(text: str, value) -> None:
    from zoo.config.errors import ConfigError

    if value.start > value.end:
        raise ConfigError(f"{text}: an interval runs from its low end to its high end")
    if "log" in value.tags and value.start <= 0:
        raise ConfigError(f"{text}: a log-scale interval starts above 0")


def _check_range(text: str, value, sweeper: str | None) -> None:
    """A range's step is not 0, and the range holds a value: with Hydra's basic sweeper
    range(START,STOP[,STEP]) runs as Python's (STOP left out), with Optuna's from low to high with
    both included (a shuffled range is a list of values, as with the basic sweeper)."""
    from zoo.config.errors import ConfigError

    start, stop, step = value.start, value.stop, value.step
    if step == 0:
        raise ConfigError(f"{text}: a range's step is not 0")
    if sweeper is None:  # not known yet: its values are checked when it is
        return
    if sweeper == "optuna" and not value.shuffle:
        if start > stop or step < 0:
            raise ConfigError(f"{text}: Optuna's range runs from its low end up to its high end (both included)")
        return
    if (stop - start) * step <= 0:  # no value: range(64,64), range(5,1)
        one = f"range({start},{start + step})"
        raise ConfigError(
            f"{text}: the range holds no values; range(START,STOP[,STEP]) runs from START up to STOP, "
            f"STOP left out ({one} is {start} alone)"
        )


def _range_start(override) -> list[str]:
    """`KEY=START` for a range Hydra lists no value of (`range(64,64)`: Optuna's range includes its
    high end, so it holds 64; `check_sweep_values` refuses it for the basic sweeper). Empty for
    any other sweep."""
    from hydra.core.override_parser.types import RangeSweep

    value = override.value()
    return [f"{override.get_key_element()}={value.start}"] if isinstance(value, RangeSweep) else []


def _interval_ends(override) -> list[float | int]:
    """The two ends of `interval(LOW, HIGH)` (tagged or not); a whole number as an int, so that
    an integer key takes it. Empty for any other sweep."""
    from hydra.core.override_parser.types import IntervalSweep

    value = override.value()
    if not isinstance(value, IntervalSweep):
        return []
    return [int(end) if float(end).is_integer() else end for end in (value.start, value.end) if end is not None]
