"""A command line written as another tool writes it gets one line with zoo's spelling, exit
status 2 and nothing on disk: a group with a dot, a comma list without -m, an argparse-style
flag (matched to zoo's keys, answered before torch or Lightning loads)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def one_line(result) -> str:
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "model.position=rope",
            "model.position=rope: model/position is a config group, chosen with a slash: model/position=rope",
        ),
        ("+model.position=alibi", "model/position is a config group, chosen with a slash: model/position=alibi"),
        (
            "model/position=rope,alibi",
            "model/position=rope,alibi: a comma list is a sweep: add -m to run one job "
            "per value (zoo-train -m model/position=rope,alibi)",
        ),
        ("seed=0,1", "seed=0,1: a comma list is a sweep: add -m"),
        (  # as docs/composing.md once wrote it: an option of the group, not a value of the key
            "model.attention=local_global",
            "model.attention=local_global: local_global is an option of the config group model/attention "
            "(it sets more than model.attention), chosen with a slash: model/attention=local_global",
        ),
    ],
)
def test_a_group_with_a_dot_or_a_list_without_m_names_the_spelling(override, expected, cli_here, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_line(cli_here("train", override))
    assert line.startswith("zoo-train: error: ") and expected in line, line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["quick"], ["quik", "seed=1"], ["-m", "quick", "seed=1,2"]])
def test_a_recipes_name_without_cn_is_one_line_with_the_flag(argv, cli_here, tmp_path, monkeypatch):
    """`zoo-train quick` (the -cn forgotten): Hydra says only "Error parsing override"."""
    monkeypatch.chdir(tmp_path)
    word = next(w for w in argv if w.startswith("qui"))
    assert one_line(cli_here("train", *argv)) == (
        f"zoo-train: error: {word}: an override is KEY=VALUE; did you mean -cn quick? "
        "(zoo-train -cn quick runs the recipe)"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "word, meant", [("llama", "model=llama"), ("rope", "model/position=rope"), ("muon", "optim=muon")]
)
def test_a_groups_option_without_its_group_is_one_line_with_the_override(word, meant, cli_here, tmp_path, monkeypatch):
    """`zoo-train llama` (the group forgotten): Hydra said only "Error parsing override"."""
    monkeypatch.chdir(tmp_path)
    assert one_line(cli_here("train", word, "seed=1")) == (
        f"zoo-train: error: {word}: an override is KEY=VALUE; did you mean {meant}?"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv, expected",
    [
        (
            ["--max_steps=10"],
            "--max_steps=10: zoo-train takes KEY=VALUE overrides, not --flags; write trainer.max_steps=10",
        ),
        (
            ["--max_steps", "10"],
            "--max_steps 10: zoo-train takes KEY=VALUE overrides, not --flags; write trainer.max_steps=10",
        ),
        (
            ["-m", "--lr", "1e-3", "seed=0,1"],
            "--lr 1e-3: zoo-train takes KEY=VALUE overrides, not --flags; write optim.lr=1e-3",
        ),
        (["--max-step=3"], "write trainer.max_steps=3"),  # a hyphen and a typo: the closest key
        (["--trainer.max_steps=4"], "write trainer.max_steps=4"),
        (["--no_such_thing=1"], "not --flags; zoo-train --help lists the keys"),
    ],
)
def test_an_argparse_flag_names_the_override(argv, expected, cli_here, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_line(cli_here("train", *argv))
    assert expected in line, line
    assert list(tmp_path.iterdir()) == []  # no runs/DATE/TIME made


@pytest.mark.parametrize(
    "argv, modes",
    [
        (["-m", "-r", "seed=0"], "--run and --multirun"),
        (["--cfg", "job", "-m", "seed=0,1"], "--multirun and --cfg"),
        (["-r", "--info"], "--run and --info"),
    ],
)
def test_two_modes_at_once_are_refused_before_anything_is_written(argv, modes, cli_here, tmp_path, monkeypatch):
    """Hydra runs one of --run, --multirun, --cfg, --info and --shell-completion, and refuses two
    only after the sweep directory is made; zoo-train refuses them first, on one line."""
    monkeypatch.chdir(tmp_path)
    result = cli_here("train", *argv)
    assert (
        result.returncode == 2
        and one_line(result) == f"zoo-train: error: {modes}: give only one of --run, --multirun, --cfg, --info and -sc"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "words, expected",
    [
        ([], "-sc takes one of install=SHELL, uninstall=SHELL, query=SHELL"),
        (["install=bash", "uninstall=bash"], "-sc takes one of install=SHELL, uninstall=SHELL, query=SHELL"),
        (["install=tcsh"], "-sc install=tcsh: the shells are bash, zsh, fish"),
        (["query=zsh"], "-sc query=zsh is what the shell runs at each Tab (it reads COMP_LINE)"),
    ],
)
def test_shell_completion_without_its_one_command_is_one_line(words, expected, cli_here, tmp_path, monkeypatch):
    """Hydra's -sc takes one of install=, uninstall=, query= (query reads the line being completed
    from COMP_LINE); otherwise Hydra ends in a traceback. zoo-train answers on one line."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COMP_LINE", raising=False)
    result = cli_here("train", "-sc", *words)
    assert result.returncode == 2 and expected in one_line(result), result.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("word", ['hydra.sweeper.params={model.n_heads:"3,4"}', '+hydra.sweeper.params={seed:"0,1"}'])
def test_a_mapping_given_to_a_null_key_is_one_line(word, cli_here, tmp_path, monkeypatch):
    """OmegaConf cannot merge a mapping into a key that holds null (the basic sweeper's params)
    and Hydra lets its AttributeError through as a traceback; zoo-train says what to do."""
    monkeypatch.chdir(tmp_path)
    result = cli_here("train", "-m", word)
    assert result.returncode == 2, result.stderr[-2000:]
    assert one_line(result) == (
        f"zoo-train: error: {word}: Hydra cannot merge a mapping into a key that holds null; sweep on the "
        "command line instead (-m KEY=A,B), or in a recipe's hydra.sweeper.params"
    )
    assert list(tmp_path.iterdir()) == []


def test_shell_completion_completes_zoos_keys(cli_here, tmp_path, monkeypatch):
    """What the shell runs at each Tab (COMP_LINE set): Hydra's completion of zoo's config."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COMP_LINE", "zoo-train mod")
    result = cli_here("train", "-sc", "query=bash")
    assert result.returncode == 0 and "model." in result.stdout.split(), result.stderr[-2000:]


def test_overrides_apart_from_the_others_are_read_with_them(cli_here, tmp_path, monkeypatch):
    """Hydra's parser takes one group of KEY=VALUE words and refuses one after a later flag;
    zoo-train hands Hydra all of them as one group, in the order written (the later value wins)."""
    monkeypatch.chdir(tmp_path)
    result = cli_here("train", "seed=3", "trainer.max_steps=7", "-cn", "config", "seed=5", "--cfg", "job", "-p", "seed")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "5" and "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_an_argparse_flag_is_answered_before_torch_loads(tmp_path):
    """In a fresh interpreter, as a user types it: one line, exit 2, in seconds, with neither
    torch nor Lightning imported and no directory made."""
    script = textwrap.dedent("""
        import json, sys, time
        start = time.perf_counter()
        sys.argv = ["zoo-train", "--max_steps=10"]
        from zoo.cli.train import main
        try:
            main()
            status = 0
        except SystemExit as exc:
            status = exc.code
        print(json.dumps({"status": status, "seconds": time.perf_counter() - start,
                          "loaded": sorted(m for m in ("torch", "lightning") if m in sys.modules)}))
    """)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    wall = time.perf_counter() - started
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["status"] == 2 and report["loaded"] == [], report
    assert "write trainer.max_steps=10" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert wall < 15, f"{wall:.1f} s"  # Hydra alone; a training start is 20 s on the reference CPU
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("override", ["hydra.run.dir=RUN\nb", "model.d_model=3\r2", "seed=\x1b[31m0"])
def test_an_override_with_a_control_character_is_named_whole(override, cli_here, tmp_path):
    """Hydra's parser answered `LexerNoViableAltException: ` with the override cut at its line
    break, naming neither the character nor what to do."""
    override = override.replace("RUN", str(tmp_path / "run"))
    result = cli_here("train", override)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"the override {override!r} holds the control character" in line and "remove it" in line
    assert not (tmp_path / "run").exists() and not (tmp_path / "run\nb").exists()
