"""One front door for every console script of pyproject.toml: `--help` exits 0 and lists each key
of the tool's schema with its default and the help text of its field; a ZooError is one line and
exit status 2; any other exception keeps its traceback; `zoo SUBCOMMAND` runs the same main
functions as the zoo-SUBCOMMAND scripts."""

from __future__ import annotations

import dataclasses
import importlib
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import tomllib

from tests.conftest import run_main
from zoo.config.errors import ConfigError, ZooError

SCRIPTS: dict[str, str] = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"][
    "scripts"
]


def entry(script: str):
    module, function = SCRIPTS[script].split(":")
    return getattr(importlib.import_module(module), function)


def flat(text: str) -> str:
    """Help text with its line wrapping undone."""
    return " ".join(text.split())


def cli_schemas() -> dict[str, list[type]]:
    """The argument schemas of the key=value tools."""
    from zoo.bench.run import BenchOptions
    from zoo.cli.bench import BenchOutput
    from zoo.cli.compare import CompareArgs
    from zoo.cli.eval import EvalArgs
    from zoo.cli.export import ExportArgs
    from zoo.cli.generate import GenerateArgs
    from zoo.cli.prepare import PrepareArgs
    from zoo.plan.options import PlanOptions

    return {
        "zoo-generate": [GenerateArgs],
        "zoo-eval": [EvalArgs],
        "zoo-export": [ExportArgs],
        "zoo-compare": [CompareArgs],
        "zoo-bench": [BenchOptions, BenchOutput],
        "zoo-prepare": [PrepareArgs],
        "zoo-plan": [PlanOptions],
    }


# (script, [args], real text its --help must show: KEY=DEFAULT and help texts)
HELP_SHOWS = {
    "zoo": (
        [],
        [
            "usage: zoo SUBCOMMAND",
            "train",
            "generate",
            "eval",
            "export",
            "compare",
            "bench",
            "prepare",
            "one report for one or more sweeps",
        ],
    ),
    "zoo-train": (
        [],
        [
            "model=gpt",
            "model/position=learned",
            "trainer=cpu",
            "model.d_model=256",
            "D, residual width",
            "seed=0",
            "global seed for weights, data order, dropout",
            "trainer.max_steps=300",
            "task.kind=causal_lm [causal_lm | masked_lm | seq2seq | classification]",
            "recipes (-cn NAME): ablate_activation",
            # recurrent layers and layer patterns (zoo.config.facts.attention, zoo.config.facts.gated_deltanet)
            "model.layer_pattern=null  [list of str or null]",
            "model.linear_value_heads=null  [int or null]",
            "model.conv_kernel=4  [int]",
        ],
    ),
    "zoo-generate": (
        [],
        [
            "max_new_tokens=64 [int]",
            "tokens generated at most",
            "strategy=greedy [greedy | beam | sample]",
            "ckpt=null [str or null]",
            "a checkpoint of a causal_lm or seq2seq run",
            "dtype=float32",
            "float32 or bfloat16",
        ],
    ),
    "zoo-eval": ([], ["split=validation", "batch_size=32 [int]", "ckpt=null", "data.KEY=VALUE"]),
    "zoo-export": ([], ["format=hf", "out=null", "a Hugging Face transformers directory"]),
    "zoo-compare": ([], ["metric=val/loss [str]", "the metric the arms are compared on", "usage: zoo-compare DIR"]),
    "zoo-bench": (
        [],
        ["batch=8 [int]", "rows per training batch", "variants=eager,compile,bf16", "out=null", "model/position=NAME"],
    ),
    "zoo-prepare": ([], ["part=null", "I/N: prepare every N-th shard", "-cn RECIPE"]),
    "zoo-plan": (
        [],
        [
            "batch=8 [int]",
            "micro-batch per device",
            "strategy=none [none | ddp | fsdp | hsdp]",
            "memory=80GiB",
            "model.checkpoint_activations=true",
        ],
    ),
}


def test_every_console_script_is_covered():
    assert set(HELP_SHOWS) == set(SCRIPTS)
    assert set(cli_schemas()) == set(SCRIPTS) - {"zoo", "zoo-train"}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_exits_0_and_shows_keys_defaults_and_help(script, flag, capsys, monkeypatch):
    args, shown = HELP_SHOWS[script]
    status, out, err = run_main(entry(script), [script, *args, flag], capsys, monkeypatch)
    assert status == 0, err[-2000:]
    assert out.startswith(f"usage: {script}")
    for text in shown:
        assert flat(text) in flat(out), (script, text)


@pytest.mark.parametrize("script", sorted(cli_schemas()))
def test_help_lists_every_key_of_the_schema_with_its_default_and_help(script, capsys, monkeypatch):
    from zoo.cli.tool import default_of, show

    status, out, _ = run_main(entry(script), [script, "--help"], capsys, monkeypatch)
    assert status == 0
    for schema in cli_schemas()[script]:
        for f in dataclasses.fields(schema):
            assert f"  {f.name}={show(default_of(f))}  [" in out, (script, f.name)
            assert f.metadata.get("help"), f"{schema.__name__}.{f.name} has no help text"
            assert flat(f.metadata["help"]) in flat(out), (script, f.name)


def test_zoo_train_help_lists_every_section_key_at_the_value_in_use(capsys, monkeypatch):
    from zoo.config.schema.root import ZooConfig

    status, out, err = run_main(entry("zoo-train"), ["zoo-train", "model=llama", "--help"], capsys, monkeypatch)
    assert status == 0, err[-2000:]
    assert "model=llama" in out and "model.norm_type=rmsnorm  [layernorm | rmsnorm]" in out  # llama.yaml's value
    for section, schema in typing.get_type_hints(ZooConfig).items():
        if not dataclasses.is_dataclass(schema):
            assert f"  {section}=" in out or f"  {section}." in out, section
            continue
        for f in dataclasses.fields(schema):
            prefix = f"{section}.{f.name}"
            assert f"  {prefix}=" in out or f"  {prefix}." in out, prefix
            if f.metadata.get("help"):
                assert flat(f.metadata["help"]) in flat(out), prefix


def test_zoo_train_help_with_a_key_that_does_not_compose_is_one_line(capsys, monkeypatch):
    status, _, err = run_main(entry("zoo-train"), ["zoo-train", "model=nope", "--help"], capsys, monkeypatch)
    assert status == 2
    (line,) = err.strip().splitlines()
    assert line.startswith("zoo-train: error:") and "Could not find 'model/nope'" in line


def user_mistakes(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """A mistake per script that each tool refuses before reading a checkpoint or training."""
    return {
        "zoo": (["trian"], "unknown subcommand 'trian'; did you mean train?"),
        "zoo-train": (["model=nope"], "Could not find 'model/nope'"),
        "zoo-generate": (["strategy=sample", "temperature=0"], "temperature must be a number >= 0.001, got 0.0"),
        "zoo-eval": ([f"ckpt={tmp_path / 'missing.ckpt'}"], "missing.ckpt"),
        "zoo-export": (["ckpt=a.ckpt", "out=b", "format=onnx"], "format='onnx' is not allowed; choose one of: hf"),
        "zoo-compare": ([str(tmp_path)], "no run directories (with .hydra/overrides.yaml) under"),
        "zoo-bench": (["batch=0"], "batch must be >= 1, got 0"),
        "zoo-prepare": (["part=9/8"], "part=9/8: I must be in 0 .. N-1"),
        "zoo-plan": (["memory=lots"], "memory='lots': write a size such as 80GiB"),
    }


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_user_mistake_is_one_line_and_exit_2(script, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args, expected = user_mistakes(tmp_path)[script]
    status, _, err = run_main(entry(script), [script, *args], capsys, monkeypatch)
    assert status == 2, err[-2000:]
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.strip()]
    assert line.startswith(f"{script}: error: ") and expected in line, line


# (module whose attribute is replaced, the attribute): a step every run of the script goes through
PLANTED = {
    "zoo-train": ("zoo.cli.train", "check_command_line"),
    "zoo-generate": ("zoo.cli.generate", "run"),
    "zoo-eval": ("zoo.cli.eval", "run"),
    "zoo-export": ("zoo.cli.export", "run"),
    "zoo-compare": ("zoo.compare.report", "find_runs"),  # a ValueError inside the comparison
    "zoo-bench": ("zoo.cli.bench", "run"),
    "zoo-prepare": ("zoo.cli.prepare", "run"),
    "zoo-plan": ("zoo.cli.plan", "run"),
    "zoo": ("zoo.cli.eval", "run"),  # through the dispatcher
}


class Planted(ValueError):
    """A bug: a ValueError that is not a ZooError."""


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_an_exception_that_is_not_a_zoo_error_keeps_its_traceback(script, tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise Planted("planted bug")

    assert set(PLANTED) == set(SCRIPTS)
    module, name = PLANTED[script]
    monkeypatch.setattr(importlib.import_module(module), name, boom)
    monkeypatch.chdir(tmp_path)
    args = {"zoo": ["eval", "ckpt=x"], "zoo-compare": [str(tmp_path)]}.get(
        script, ["seed=1"] if script == "zoo-train" else []
    )
    monkeypatch.setattr(sys, "argv", [script, *args])
    with pytest.raises(Planted, match="planted bug"):
        entry(script)()


def test_serve_folds_a_zoo_error_onto_one_line_and_lets_other_errors_through(capsys):
    from zoo.cli.tool import serve
    from zoo.data.errors import DataError

    def refuse(argv):
        raise DataError("data.path=x.txt: no such file\n  give an existing file")

    with pytest.raises(SystemExit) as exc:
        serve("zoo-x", refuse, lambda: "usage: zoo-x", [])
    assert exc.value.code == 2
    assert capsys.readouterr().err == "zoo-x: error: data.path=x.txt: no such file give an existing file\n"

    def bug(argv):
        raise KeyError("not a user's mistake")

    with pytest.raises(KeyError):
        serve("zoo-x", bug, lambda: "usage: zoo-x", [])


def test_user_errors_derive_from_zoo_error_and_still_from_value_error():
    import zoo
    from zoo.data.errors import DataError
    from zoo.data.tokenizers.state import TokenizerStateError
    from zoo.training.checkpoint.files import CheckpointError
    from zoo.training.resume.match import ResumeMismatch

    assert zoo.ZooError is ZooError
    for cls in (ConfigError, DataError, CheckpointError, TokenizerStateError, ResumeMismatch):
        assert issubclass(cls, ZooError) and issubclass(cls, ValueError), cls
    assert not issubclass(ValueError, ZooError)


def test_generate_args_declare_the_decoding_options_once():
    from zoo.cli.generate import GenerateArgs
    from zoo.models.generate import GenerationConfig

    assert issubclass(GenerateArgs, GenerationConfig)
    redeclared = set(GenerateArgs.__dict__.get("__annotations__", {})) & {
        f.name for f in dataclasses.fields(GenerationConfig)
    }
    assert not redeclared


def test_the_zoo_dispatcher_table_is_project_scripts():
    from zoo.cli.main import COMMANDS

    assert SCRIPTS["zoo"] == "zoo.cli.main:main"
    assert {f"zoo-{name}": target for name, target in COMMANDS.items()} == {
        name: target for name, target in SCRIPTS.items() if name != "zoo"
    }


@pytest.mark.slow  # starts a Python process that imports zoo
def test_zoo_subcommand_runs_the_tool_in_a_process_of_its_own(tmp_path):
    """As a user runs it: `python -m zoo.cli.main compare ...` (the `zoo` script's main)."""

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "zoo.cli.main", *args], capture_output=True, text=True, timeout=120, cwd=tmp_path
        )

    helped = run("compare", "--help")
    assert helped.returncode == 0 and "metric=val/loss" in helped.stdout, helped.stderr[-2000:]
    refused = run("compare", str(tmp_path / "missing"))
    assert (
        refused.returncode == 2
        and refused.stderr.strip() == f"zoo-compare: error: not a directory: {tmp_path / 'missing'}"
    )


def test_every_config_group_option_that_help_offers_is_in_the_docs():
    """zoo-train --help lists every config group and its options from the search path; the
    override table of docs/composing.md names each of them in the row of its group."""
    from pathlib import Path

    from zoo.cli.compose import config_groups

    page = (Path(__file__).resolve().parents[2] / "docs" / "composing.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `") and "=` " in line.split("|")[1] + " "]
    missing = []
    for group, options in config_groups(None, [], ("hydra/launcher",)).items():
        row = next((r for r in rows if f"`{group}=`" in r.split("|")[1]), None)
        if row is None:
            missing.append(f"{group} (no row)")
            continue
        named = set(row.split("|", 2)[2].split("`")[1::2])  # every `code span` of the values cell
        missing += [f"{group}={option}" for option in options if option not in named]
    assert not missing, f"zoo-train --help offers what docs/composing.md's override table does not list: {missing}"
