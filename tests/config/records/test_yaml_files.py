"""YAML with aliases (a "billion laughs": a few hundred bytes that name 10^9 values) is refused,
on one line naming the file, before Hydra or OmegaConf expands it: in a `-cd` config
directory, a `hydra.searchpath` directory, and the records of a run that zoo-train and
zoo-compare read back. Each attack runs under an alarm: were the file expanded, the call would
not return and the alarm would fail the test."""

from __future__ import annotations

import contextlib
import signal
import time

import pytest

from zoo.config.errors import ConfigError
from zoo.config.records.yaml_files import UnboundedYaml, check_config_dir, load_yaml

_BOUND_S = 20  # the refusals below take well under a second; an expansion takes hours


def bomb(levels: int = 9, head: str = "") -> str:
    """A YAML file of under 1 KiB naming 10**levels strings through nested aliases."""
    lines = [head.rstrip("\n")] if head else []
    lines.append("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]")
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def bounded(seconds: int = _BOUND_S):
    """Fail (TimeoutError) when the block runs longer than `seconds`."""

    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: the YAML was expanded")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _missed(result, *fragments: str) -> list[str]:
    """What the outcome lacks of a refusal on one line naming each fragment: empty when it is one."""
    err = result.stderr.strip()
    wrong = [] if result.returncode == 2 else [f"exit {result.returncode}: {result.stderr[-2000:]}"]
    if "Traceback" in result.stderr or len(err.splitlines()) != 1:
        wrong.append(f"not one line: {err}")
    return wrong + [f"{fragment!r} not in {err!r}" for fragment in fragments if fragment not in err]


def _one_line(result, *fragments: str) -> str:
    assert _missed(result, *fragments) == []
    return result.stderr.strip()


@pytest.mark.parametrize("flags", [["--cfg", "job"], [], ["--info"], ["--info", "config"], ["--help"]])
def test_a_config_directory_with_aliases_is_refused_before_hydra_composes(flags, tmp_path, cli_here):
    """Whatever the command asks (a run, its config, Hydra's --info, which Hydra answers by
    composing on its own), the directory's files are checked first."""
    (tmp_path / "bomb.yaml").write_text(bomb(head="defaults:\n  - zoo_config\n  - _self_\n"))
    started = time.monotonic()
    with bounded():
        result = cli_here("train", "-cd", str(tmp_path), "-cn", "bomb", f"hydra.run.dir={tmp_path / 'run'}", *flags)
    err = _one_line(result, f"{tmp_path / 'bomb.yaml'}, line 5", "YAML alias (*a0) is refused")
    assert time.monotonic() - started < 10, err
    assert not (tmp_path / "run").exists()


def test_a_group_option_with_aliases_is_refused_in_any_config_directory(tmp_path, cli_here):
    """The bomb is an option of a group in a directory the command line adds to the search path
    (`-cd`, or `hydra.searchpath`), not the file the run starts from."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "bomb.yaml").write_text(bomb())
    with bounded():
        by_cd = cli_here("train", "-cd", str(tmp_path), "model=bomb", "--cfg", "job")
        by_searchpath = cli_here("train", f"hydra.searchpath=[file://{tmp_path}]", "model=bomb", "--cfg", "job")
    for result in (by_cd, by_searchpath):
        assert _missed(result, str(tmp_path / "model" / "bomb.yaml"), "YAML alias") == []


def test_zoo_compare_reads_no_alias_from_a_sweep(tmp_path, cli_here):
    """A run whose recorded .hydra/config.yaml (or overrides.yaml) holds aliases is damaged:
    left out of the comparison with a line naming the file, and zoo-compare returns."""
    sweep = tmp_path / "sweep"
    for job, name in (("0", "config.yaml"), ("1", "overrides.yaml")):
        hydra = sweep / job / ".hydra"
        hydra.mkdir(parents=True)
        (hydra / "overrides.yaml").write_text(f"- seed={job}\n")
        (hydra / "config.yaml").write_text(f"seed: {job}\n")
        (hydra / name).write_text(bomb())
    with bounded():
        result = cli_here("compare", str(sweep))
    err = _one_line(result, "no run under", "YAML alias (*a0) is refused")
    assert (
        f"{sweep / '0' / '.hydra' / 'config.yaml'}, line 2" in err
        or f"{sweep / '1' / '.hydra' / 'overrides.yaml'}, line 2" in err
    ), err


def test_a_rerun_refuses_a_recorded_config_with_aliases(tmp_path):
    """zoo-train reads a finished run's config.yaml to decide whether a rerun trains on: an
    alias there is refused, not passed over (passing over it would read it on)."""
    from zoo.training.resume.point import _recorded_trainer

    (tmp_path / "config.yaml").write_text(bomb(head="trainer:\n  max_epochs: 1\n"))
    with bounded(), pytest.raises(UnboundedYaml, match=r"config.yaml, line 4: a YAML alias \(\*a0\)"):
        _recorded_trainer(tmp_path)
    (tmp_path / "config.yaml").write_text("trainer:\n  max_epochs: 1\n")
    assert _recorded_trainer(tmp_path) == {"max_epochs": 1}


def test_a_sweeps_multirun_yaml_with_aliases_names_no_keys(tmp_path):
    from zoo.training.tracking.identity import swept_keys

    (tmp_path / "multirun.yaml").write_text(bomb())
    started = time.monotonic()
    with bounded():  # swept_keys passes over what it cannot read: the time says it was not expanded
        assert swept_keys(tmp_path / "multirun.yaml") is None
    assert time.monotonic() - started < 5


def test_the_checked_reader_reads_plain_yaml_and_refuses_the_rest(tmp_path):
    plain = tmp_path / "plain.yaml"
    plain.write_text("a: [1, 2]\nb: {c: x}\n")
    assert load_yaml(plain) == {"a": [1, 2], "b": {"c": "x"}}
    merged = tmp_path / "merge.yaml"
    merged.write_text("base: &b {x: 1}\nother:\n  <<: *b\n")  # a merge key is an alias too
    with pytest.raises(UnboundedYaml, match="line 3"):
        load_yaml(merged)
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="broken.yaml, line 2: not valid YAML"):
        load_yaml(broken)
    huge = tmp_path / "huge.yaml"
    with huge.open("w") as f:
        f.truncate(17 * 2**20)
    with pytest.raises(UnboundedYaml, match="over 16 MiB"):
        load_yaml(huge)
    nested = tmp_path / "conf" / "model"
    nested.mkdir(parents=True)
    (nested / "x.yaml").write_text(bomb(levels=3))
    with pytest.raises(UnboundedYaml, match="x.yaml, line 2"):
        check_config_dir(tmp_path / "conf")
    linked = tmp_path / "linked"  # a group directory that is a link (Hydra follows it), and a loop
    linked.mkdir()
    (linked / "model").symlink_to(nested)
    (linked / "loop").symlink_to(linked)
    with pytest.raises(UnboundedYaml, match="x.yaml, line 2"):
        check_config_dir(linked)


def test_a_pipe_at_a_configs_name_is_refused_without_waiting_for_it(tmp_path, cli_here):
    """A pipe planted as a run's recorded config.yaml or as a `-cd` recipe blocked the read for
    ever (it waits for a writer)."""
    import os

    os.mkfifo(tmp_path / "recipe.yaml")
    with pytest.raises(ConfigError, match="recipe.yaml: not a regular file"):
        load_yaml(tmp_path / "recipe.yaml")
    started = time.monotonic()
    result = cli_here("train", "-cd", str(tmp_path), "-cn", "recipe", f"hydra.run.dir={tmp_path / 'run'}")
    _one_line(result, "recipe.yaml: not a regular file")
    assert time.monotonic() - started < 10 and not (tmp_path / "run").exists()


def test_zoos_own_configs_hold_no_alias():
    """zoo's conf/ and recipes/ pass the check every foreign config directory passes."""
    from zoo.config.paths import CHECKOUT

    for folder in ("conf", "recipes"):
        check_config_dir(CHECKOUT / folder)
