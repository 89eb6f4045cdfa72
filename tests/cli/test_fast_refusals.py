"""Refusals that answer before torch loads: zoo-generate's and zoo-eval's arguments, prompts,
output paths and checkpoint paths, and zoo-train's data files, are checked by torch-free code;
integer options take 1e9; an unknown key gets the closest one."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from zoo.cli.args import parse
from zoo.cli.eval import EvalArgs
from zoo.cli.generate import GenerateArgs
from zoo.config.errors import CheckpointError, ConfigError
from zoo.config.records.rundir import locate_checkpoint

ROOT = Path(__file__).resolve().parents[2]


def _torch_save_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PK\x03\x04" + b"\0" * 60)  # the zip header torch.save writes first
    return path


def test_a_checkpoint_is_found_in_a_run_directory_or_its_checkpoints_directory(tmp_path):
    last = _torch_save_file(tmp_path / "run" / "checkpoints" / "last.ckpt")
    assert locate_checkpoint(tmp_path / "run") == last
    assert locate_checkpoint(tmp_path / "run" / "checkpoints") == last
    assert locate_checkpoint(last) == last
    full = _torch_save_file(tmp_path / "run" / "checkpoints" / "full.ckpt")  # a sharded run's whole model
    assert locate_checkpoint(tmp_path / "run") == full
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    (sharded / "meta.pt").write_bytes(b"PK")
    assert locate_checkpoint(sharded) == sharded


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda d: d / "missing.ckpt", ["missing.ckpt", "does not exist"]),
        (lambda d: d, ["directory without a checkpoint", "checkpoints/last.ckpt"]),
        (lambda d: (d / "notes.txt", (d / "notes.txt").write_text("hello"))[0], ["notes.txt", "not a checkpoint"]),
    ],
)
def test_a_path_that_holds_no_checkpoint_is_refused_naming_it(tmp_path, make, words):
    with pytest.raises(CheckpointError) as caught:
        locate_checkpoint(make(tmp_path))
    assert all(w in str(caught.value) for w in words), str(caught.value)


@pytest.mark.parametrize(
    "override, words",
    [
        ("optim.lr=nan", "optim.lr must be a finite number, got nan"),
        ("model.dropout=inf", "model.dropout must be a finite number, got inf"),
        ("trainer.gradient_clip_val=nan", "trainer.gradient_clip_val must be a finite number"),
        ("trainer.max_steps=0", "trainer.max_steps must be a positive number of steps"),
        ("trainer.max_steps=-5", "trainer.max_steps must be an integer >= -1"),
    ],
)
def test_non_finite_settings_and_a_run_of_no_steps_are_refused_naming_the_key(override, words):
    import zoo

    with pytest.raises(ConfigError, match=words):
        zoo.validate(zoo.compose([override]))


@pytest.mark.parametrize("seed", ["-1", "4294967296", "99999999999999999999999"])
@pytest.mark.parametrize("tool", ["train", "generate", "bench"])
def test_a_seed_no_library_takes_is_one_line_naming_it(cli_here, tmp_path, tool, seed):
    """seed=-1 reached Lightning's seed_everything (a ValueError's traceback, after the run
    directory was made); a seed past 2**64 reached torch's Generator in zoo-generate."""
    args = {
        "train": [f"hydra.run.dir={tmp_path / 'run'}"],
        "generate": [f"ckpt={tmp_path / 'none.ckpt'}", "strategy=sample"],
        "bench": [],
    }[tool]
    result = cli_here(tool, *args, f"seed={seed}")
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"seed must be an integer from 0 to 4294967295, got {seed}" in line
    assert not (tmp_path / "run").exists()


def test_a_thread_count_torch_cannot_take_is_one_line(cli_here):
    result = cli_here("bench", "threads=99999999999999999999999", "peers=none")  # torch's overflow, after 79 s
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "threads must be from 0 to 4096" in line


def test_a_rope_base_of_1_or_less_is_refused_naming_it():
    import zoo

    # 1e-300 turned every frequency to inf: the run trained to a NaN loss and named optim.lr
    for theta in ("1e-300", "1"):
        with pytest.raises(ConfigError, match=r"model.position.theta must be > 1"):
            zoo.validate(zoo.compose(["model/position=rope", f"model.position.theta={theta}"]))


def test_a_cache_that_is_a_file_is_one_line_naming_it(zoo_train_here, tmp_path, monkeypatch):
    from tests.cli.conftest import tiny_overrides

    blocker = tmp_path / "cache"
    blocker.write_text("not a directory")
    monkeypatch.setenv("ZOO_CACHE", str(blocker))
    result = zoo_train_here(*tiny_overrides(tmp_path / "run"))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert (
        f"$ZOO_CACHE {blocker} is not a directory; point data.cache_dir or ZOO_CACHE at a directory"
        in (result.stderr.strip().splitlines()[-1])
    )
    assert blocker.read_text() == "not a directory"


def test_a_norm_eps_that_swamps_the_variance_is_refused():
    import zoo

    with pytest.raises(ConfigError, match=r"model.norm_eps must be in \(0, 1\), got 1e\+308"):
        zoo.validate(zoo.compose(["model.norm_eps=1e308"]))
    zoo.validate(zoo.compose(["model.norm_eps=1e-6"]))


def test_a_pipe_or_a_device_is_named_and_never_read_as_a_checkpoint(tmp_path):
    import os

    fifo = tmp_path / "pipe.ckpt"
    os.mkfifo(fifo)  # a read of it would block for ever
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(CheckpointError, match="is not a regular file"):
            locate_checkpoint(path)


@pytest.mark.slow
def test_a_garbled_start_time_in_the_environment_is_one_line(tmp_path):
    import os

    result = subprocess.run(
        [sys.executable, "-m", "zoo.cli.train", f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "ZOO_RUN_TIME": "garbage"},
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "ZOO_RUN_TIME='garbage' is not a start time" in line and "unset it" in line
    assert not (tmp_path / "run").exists()


def test_integer_options_take_scientific_notation_and_bad_values_name_the_type():
    args, _ = parse(GenerateArgs, ["max_new_tokens=1e3", "batch_size=2.0"])
    assert (args.max_new_tokens, args.batch_size) == (1000, 2)
    for arg, words in [
        ("max_new_tokens=2.5", "give an integer"),
        ("max_new_tokens=abc", "give an integer"),
        ("temperature=hot", "give a number"),
        ("compile=maybe", "give true or false"),
    ]:
        with pytest.raises(ConfigError, match=f"{arg.split('=')[0]}=.*: {words}"):
            parse(GenerateArgs, [arg])


@pytest.mark.parametrize(
    "schema, typo, key", [(GenerateArgs, "max_new_token", "max_new_tokens"), (EvalArgs, "batchsize", "batch_size")]
)
def test_an_unknown_key_is_answered_with_the_closest(schema, typo, key):
    with pytest.raises(ConfigError, match=f"did you mean {key}\\? allowed keys"):
        parse(schema, [f"{typo}=1"])


@pytest.mark.slow
def test_input_refusals_answer_before_torch_loads(tmp_path):
    """Each refusal in one fresh interpreter (no torch imported by the test runner): the
    message, exit status 2, and torch never imported."""
    ckpt = _torch_save_file(tmp_path / "run" / "checkpoints" / "last.ckpt")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "no_dir").mkdir()
    cases = [
        ("generate", [f"ckpt={tmp_path / 'missing.ckpt'}", "prompt=x"], "does not exist"),
        ("generate", [f"ckpt={tmp_path / 'no_dir'}", "prompt=x"], "directory without a checkpoint"),
        ("generate", [f"ckpt={ckpt}", "prompt="], "the prompt is empty"),
        ("generate", [f"ckpt={ckpt}", f"prompts={tmp_path / 'empty.txt'}"], "holds no prompt"),
        ("generate", [f"ckpt={ckpt}", "prompt=x", "device=gpu"], "device must be auto, cpu or cuda"),
        ("generate", [f"ckpt={ckpt}", "prompt=x", f"attention_map={tmp_path / 'a.jpg'}"], "give a .png file"),
        ("generate", [f"ckpt={ckpt}", "prompt=x", "strategy=greedy", "top_k=5"], "only applies to strategy=sample"),
        ("eval", [f"ckpt={ckpt}", "split=test"], "validation, train"),
        ("eval", [f"ckpt={ckpt}", f"data={tmp_path / 'none.txt'}"], "no such file"),
        ("eval", [f"ckpt={ckpt}", f"data={tmp_path}"], "is a directory"),
        ("generate", [f"ckpt={ckpt}", f"prompts={tmp_path}"], "is a directory; give a text file of one prompt a line"),
        ("eval", [f"ckpt={tmp_path / 'missing.ckpt'}"], "does not exist"),
        (
            "generate",
            [f"ckpt={ckpt}", "prompt=x", "strategy=sample", "temperature=1e-45"],
            "temperature must be a number >= 0.001",
        ),
        (
            "generate",
            [f"ckpt={ckpt}", "prompt=x", "strategy=sample", "temperature=nan"],
            "temperature must be a number",
        ),
        (
            "generate",
            [f"ckpt={ckpt}", "prompt=x", "strategy=beam", "length_penalty=inf"],
            "length_penalty must be a number from -10 to 10",
        ),
        (  # a finite penalty past the bound overflowed (1e308) or divided by 0 (-1e308) in beam ranking
            "generate",
            [f"ckpt={ckpt}", "prompt=x", "strategy=beam", "length_penalty=1e308"],
            "length_penalty must be a number from -10 to 10",
        ),
        (
            "generate",
            [f"ckpt={ckpt}", "prompt=x", "strategy=beam", "length_penalty=-1e308"],
            "length_penalty must be a number from -10 to 10",
        ),
        ("export", [f"ckpt={ckpt}", f"out={tmp_path / 'empty.txt'}"], "is a file; give a new or empty directory"),
        ("export", [f"ckpt={tmp_path / 'missing.ckpt'}", f"out={tmp_path / 'hf'}"], "does not exist"),
    ]
    script = textwrap.dedent(f"""
        import contextlib, io, json, sys
        from zoo.cli import eval as zoo_eval, export as zoo_export, generate as zoo_generate
        tools = {{"generate": zoo_generate.main, "eval": zoo_eval.main, "export": zoo_export.main}}
        out = []
        for tool, argv, _ in {cases!r}:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                try:
                    tools[tool](argv)
                    status = 0
                except SystemExit as exc:
                    status = exc.code
            out.append([status, err.getvalue()])
        print(json.dumps({{"results": out, "torch": "torch" in sys.modules}}))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    import json

    report = json.loads(result.stdout.strip().splitlines()[-1])
    for (tool, argv, words), (status, err) in zip(cases, report["results"]):
        assert status == 2 and words in err and len(err.strip().splitlines()) == 1, (tool, argv, status, err)
    assert not report["torch"], "a refusal imported torch"


@pytest.mark.slow
def test_every_tool_answers_help_without_torch():
    """`--help` of each console script in one fresh interpreter: its usage line, and torch
    never imported (an import of torch alone takes seconds on a loaded 2-core machine)."""
    script = textwrap.dedent("""
        import contextlib, importlib, io, json, sys
        tools = ["train", "generate", "eval", "export", "compare", "bench", "prepare", "main"]
        seen = {}
        for name in tools:
            module = importlib.import_module(f"zoo.cli.{name}")
            out = io.StringIO()
            sys.argv = [f"zoo-{name}", "--help"]
            with contextlib.redirect_stdout(out):
                try:
                    module.main()
                except SystemExit:
                    pass
            seen[name] = out.getvalue()[:200]
        print(json.dumps({"help": seen, "torch": "torch" in sys.modules}))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    import json

    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert all("usage" in text.lower() for text in report["help"].values()), report["help"]
    assert not report["torch"], "a --help imported torch"


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["train", "eval", "bench"])
def test_a_pipe_closed_early_ends_quietly(tool):
    """`zoo-TOOL --help | head -1`: the first line, and no traceback when head stops reading."""
    result = subprocess.run(
        f"'{sys.executable}' -m zoo.cli.{tool} --help | head -1",
        shell=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.stdout.startswith("usage:") and len(result.stdout.splitlines()) == 1, result.stdout
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr
