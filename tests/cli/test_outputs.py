"""Every file a tool writes at its end (`out=`, zoo-generate's pictures) is checked at its start
(`zoo.cli.outputs`): never onto a run's checkpoints or records, a report's tables, the tool's
own input or a link. `zoo-eval ... out=RUN/checkpoints/last.ckpt` replaced the run's checkpoint
with JSON and exited 0; each such command is now one line, before any work, every file of the
run byte for byte as it was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from tests.cli.conftest import missed
from tests.conftest import tiny


def _save_checkpoint(path: Path) -> Path:
    """A decoder-only checkpoint with the byte tokenizer, saved as zoo-train saves one."""
    from zoo.config.facts.tasks import task_of_family
    from zoo.config.schema.model import Family
    from zoo.data.tokenizers.byte import ByteTokenizer
    from zoo.data.tokenizers.state import tokenizer_state
    from zoo.tasks import TASKS

    kind = task_of_family(Family.decoder_only)
    task = TASKS[kind](model=tiny(vocab_size=300, max_seq_len=32), task={"kind": kind.value})
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"hyper_parameters": dict(task.hparams), "state_dict": task.state_dict()}
    torch.save({**state, "zoo_tokenizer": tokenizer_state(ByteTokenizer())}, path)
    return path


RECORDS = {
    "config.yaml": "seed: 0\n",
    "summary.json": json.dumps({"status": "finished", "metrics": {"val/loss": 2.5}}),
    "metrics.csv": "step,val/loss\n1,2.5\n",
    "failed.json": json.dumps({"status": "failed", "error": "stopped"}),
    "tracking.json": "{}",
    ".hydra/config.yaml": "seed: 0\n",
    ".hydra/overrides.yaml": "- seed=0\n",
    "tokenizer/tokenizer.json": "{}",
}


@pytest.fixture(scope="module")
def made_run(tmp_path_factory) -> Path:
    """A run directory as zoo-train leaves it: its checkpoints and every record."""
    run = tmp_path_factory.mktemp("outputs") / "run"
    _save_checkpoint(run / "checkpoints" / "last.ckpt")
    shutil.copyfile(run / "checkpoints" / "last.ckpt", run / "checkpoints" / "best-6.ckpt")
    for name, text in RECORDS.items():
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text(text)
    return run


@pytest.fixture
def run(made_run, tmp_path) -> Path:
    """A fresh copy of the run for each test (a refusal must leave every file as it was)."""
    return Path(shutil.copytree(made_run, tmp_path / "run", symlinks=True))


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _refused(result, tool: str, *fragments: str) -> None:
    assert missed(result, tool, *fragments) == []


TARGETS = ["checkpoints/last.ckpt", "checkpoints/best-6.ckpt", *RECORDS]
TOOLS = {
    "eval": ["ckpt={run}/checkpoints/last.ckpt", "data={data}", "seq_len=16", "limit_batches=1"],
    "eval harness": ["ckpt={run}/checkpoints/last.ckpt", "harness=kjv_cloze", "limit=1"],
    "bench": ["model.n_layers=1"],
    "plan": ["model.n_layers=1"],
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_out_onto_a_runs_checkpoint_or_record_is_refused_before_the_work(tool, target, run, cli_here):
    before = _files(run)
    data = run.parent / "held_out.txt"
    data.write_text("hello world " * 40)
    argv = [a.format(run=run, data=data) for a in TOOLS[tool]]
    result = cli_here(tool.split()[0], *argv, f"out={run / target}")
    if target == "checkpoints/last.ckpt" and tool.startswith("eval"):
        _refused(result, "eval", f"out={run / target} is the file this command reads (ckpt=")
    else:
        _refused(result, tool.split()[0], f"out={run / target} is {target} of {run}", "give a place outside them")
    assert _files(run) == before


@pytest.mark.parametrize(
    "key, target", [("positions_plot", "checkpoints/map.png"), ("attention_map", ".hydra/map.png")]
)
def test_zoo_generate_draws_into_no_runs_records(key, target, run, cli_here):
    before = _files(run)
    result = cli_here("generate", f"ckpt={run}", "prompt=hi", "max_new_tokens=2", f"{key}={run / target}")
    _refused(result, "generate", f"{key}={run / target} is {target} of {run}")
    assert _files(run) == before and not (run / target).exists()


@pytest.mark.parametrize("tool, out", [("export", "checkpoints/hf"), ("export", "tokenizer/hf"), ("compare", ".hydra")])
def test_an_output_directory_inside_a_runs_records_is_refused(tool, out, run, cli_here):
    before = _files(run)
    argv = [f"ckpt={run}"] if tool == "export" else [str(run)]
    result = cli_here(tool, *argv, f"out={run / out}")
    _refused(result, tool, f"out={run / out} is {out} of {run}")
    assert _files(run) == before


def test_out_onto_the_tools_own_input_is_refused(run, tmp_path, cli_here):
    """zoo-eval's checkpoint outside any run, its data file; zoo-generate's prompts; a report's
    runs.csv, which zoo-compare recompute= reads back."""
    alone = _save_checkpoint(tmp_path / "alone" / "model.ckpt")
    data = tmp_path / "held_out.txt"
    data.write_text("hello world " * 40)
    prompts = tmp_path / "prompts.png"  # a text file, named as a picture
    prompts.write_text("hello\n")
    kept = {p: p.read_bytes() for p in (alone, data, prompts)}
    for tool, argv, fragment in [
        ("eval", [f"ckpt={alone}", f"out={alone}"], f"out={alone} is the file this command reads (ckpt={alone})"),
        ("eval", [f"ckpt={alone}", f"data={data}", f"out={data}"], f"out={data} is the file this command reads (data="),
        (
            "generate",
            [f"ckpt={alone}", f"prompts={prompts}", f"positions_plot={prompts}"],
            f"positions_plot={prompts} is the file this command reads (prompts=",
        ),
    ]:
        _refused(cli_here(tool, *argv), tool, fragment)
    assert {p: p.read_bytes() for p in kept} == kept
    sweep = tmp_path / "sweep"
    shutil.copytree(run, sweep / "0", symlinks=True)
    assert cli_here("compare", str(sweep)).returncode == 0
    tables = _files(sweep / "compare")
    for tool, argv in [("eval", [f"ckpt={alone}"]), ("plan", ["model.n_layers=1"]), ("compare", [str(sweep)])]:
        result = cli_here(tool, *argv, f"out={sweep / 'compare' / 'runs.csv'}")
        _refused(result, tool, f"out={sweep / 'compare' / 'runs.csv'} is runs.csv of {sweep / 'compare'}")
    assert _files(sweep / "compare") == tables


def test_out_through_a_link_is_refused_before_the_work(tmp_path, cli_here):
    victim = tmp_path / "victim.json"
    victim.write_text("keep me\n")
    link = tmp_path / "plan.json"
    link.symlink_to(victim)
    _refused(cli_here("plan", "model.n_layers=1", f"out={link}"), "plan", f"out={link} is a symbolic link")
    assert victim.read_text() == "keep me\n"
