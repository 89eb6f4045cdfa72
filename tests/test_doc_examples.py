"""Every command example of the README, of docs/ and of each tool's `--help` runs as printed.

The examples are read from the pages and the tools' own help texts (nothing is listed here
by hand), with the placeholders a reader fills in (`ckpt=...`, `SWEEP`, `path/to/llama`,
`corpus/*.txt`) filled with small real things made in a temporary directory. A command that
only prints (`--help`, `--cfg job`) and `zoo-plan` run whole; a training, a sweep, a SLURM or GPU
command is taken as far as zoo-train takes it before its first file: the command line read as
Hydra reads it, every job of a sweep composed and validated (the machine check left out: a GPU
command is checked on any machine); the other tools' arguments are read by their own parsers
and checks. An example printed with the refusal it gets (docs/composing.md) must get that
very line. The inference tools' examples run whole on a tiny checkpoint in the slow tier."""

from __future__ import annotations

import importlib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOOLS = ("train", "generate", "eval", "export", "compare", "bench", "plan", "prepare", "main")
INFERENCE = ("zoo-generate", "zoo-eval", "zoo-export")


@dataclass(frozen=True)
class Example:
    where: str  # the page, or the tool whose --help shows it
    line: str  # as printed
    refusal: str | None = None  # the line the page prints after it, when it shows a refusal

    @property
    def words(self) -> list[str]:
        return tool_words(self.line)


def tool_words(line: str) -> list[str] | None:
    """The words of a command of a tool of zoo, as `zoo-TOOL ARGS...`: `zoo SUBCOMMAND`,
    `torchrun ... -m zoo.cli.TOOL`, `sbatch --wrap "zoo-TOOL ..."` and `sbatch recipes/zoo.sbatch
    ARGS` (zoo-train with the job's shape) read as the zoo-train or zoo-TOOL they run; None for
    any other line."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    if not words:
        return None
    if words[0] == "zoo" and len(words) > 1:
        return [f"zoo-{words[1] if words[1] != 'SUBCOMMAND' else 'train'}", *words[2:]]
    if re.fullmatch(r"zoo-[a-z]+", words[0]):
        return words
    if "-m" in words and words[words.index("-m") + 1 :][:1] and words[words.index("-m") + 1].startswith("zoo.cli."):
        at = words.index("-m")
        return [f"zoo-{words[at + 1].removeprefix('zoo.cli.')}", *words[at + 2 :]]
    if words[0] == "sbatch":
        wrapped = [
            w.split("=", 1)[1] if w.startswith("--wrap=") else words[i + 1]
            for i, w in enumerate(words)
            if w.startswith("--wrap")
        ]
        if wrapped:
            return tool_words(wrapped[0].replace("$SLURM_ARRAY_TASK_ID", "3"))
        if "recipes/zoo.sbatch" in words:
            shape = ["trainer.num_nodes=1", "trainer.devices=8", "trainer.strategy=ddp"]
            return ["zoo-train", *shape, *words[words.index("recipes/zoo.sbatch") + 1 :]]
    return None


def examples_in(text: str, where: str) -> list[Example]:
    """The commands of a tool of zoo in `text`'s code: fenced blocks and indented ones, a line
    continued with a backslash joined, a `$ ` prompt dropped."""
    found = []
    fenced = re.findall(r"^```[\w-]*\n(.*?)^```", text, flags=re.M | re.S)
    indented = re.findall(r"(?:^(?: {4}|\t).*\n?)+", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S), flags=re.M)
    for body in fenced + indented:
        lines = [line.strip() for line in body.replace("\\\n", " ").splitlines()]
        for i, line in enumerate(lines):
            line = line[2:] if line.startswith("$ ") else line
            if tool_words(line) is None:
                continue
            after = lines[i + 1] if i + 1 < len(lines) else ""
            refusal = after if re.match(r"zoo-[a-z]+: error: ", after) else None
            found.append(Example(where, line, refusal))
    return found


def all_examples() -> list[Example]:
    found = [e for page in PAGES for e in examples_in(page.read_text(), page.name)]
    for tool in TOOLS:
        module = importlib.import_module(f"zoo.cli.{tool}")
        found += examples_in(module.__doc__ or "", f"zoo-{tool} --help" if tool != "main" else "zoo --help")
    return found


EXAMPLES = all_examples()


def test_the_examples_are_found():
    """The reading above finds the examples of every page that has them and of every tool."""
    places = {e.where for e in EXAMPLES}
    assert len(EXAMPLES) >= 70, len(EXAMPLES)
    assert {
        "README.md",
        "index.md",
        "ablations.md",
        "generating.md",
        "memory-planner.md",
        "scaling-out.md",
        "performance.md",
        "interop.md",
        "data.md",
        "tracking.md",
    } <= places, places
    assert {f"zoo-{t} --help" for t in TOOLS if t != "main"} <= places, places
    assert {e.words[0] for e in EXAMPLES} == {
        "zoo-train",
        "zoo-generate",
        "zoo-eval",
        "zoo-export",
        "zoo-compare",
        "zoo-bench",
        "zoo-plan",
        "zoo-prepare",
    }


# ---- the placeholders a reader fills in, filled with real things ---------------------------------


def tiny_hf(directory: Path, kind: str) -> Path:
    """A tiny Hugging Face model directory (config and safetensors weights) for init_from=hf:."""
    import torch
    import transformers

    torch.manual_seed(0)
    if kind == "llama":
        config = transformers.LlamaConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            vocab_size=300,
            max_position_embeddings=128,
        )
        model = transformers.LlamaForCausalLM(config)
    else:
        config = transformers.BertConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            vocab_size=300,
            max_position_embeddings=512,
        )
        model = transformers.BertForMaskedLM(config)
    model.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A working directory holding what the examples name: a corpus, data files, prompts, tiny
    Hugging Face directories, sweep directories."""
    here = tmp_path_factory.mktemp("examples")
    (here / "corpus").mkdir()
    text = "In the beginning God created the heaven and the earth.\n" * 200
    (here / "corpus" / "a.txt").write_text(text)
    (here / "my.txt").write_text(text)
    (here / "labels.csv").write_text("text,label\n" + "".join(f"line {i},{'ab'[i % 2]}\n" for i in range(200)))
    for name in ("prompts.txt", "phrases.txt"):
        (here / name).write_text("And God said\nIn the beginning\n")
    (here / "held_out.jsonl").write_text("".join(json.dumps({"text": text[:600]}) + "\n" for _ in range(20)))
    for sweep in (
        "SWEEP",
        "SWEEP_A",
        "SWEEP_B",
        "multirun/DATE/TIME",
        "multirun/first",
        "multirun/2026-11-22/10-00-00",
        "reports/STUDY",  # a committed report compared again from its runs.csv
        "reports/wsd_cooldown",
    ):
        (here / sweep).mkdir(parents=True)
    (here / "benchmarks" / "results").mkdir(parents=True)
    stable = here / "runs" / "stable" / "checkpoints"  # branch_from=: `${zoo.branch_end:}` reads its step
    stable.mkdir(parents=True)
    import torch

    torch.save({"global_step": 2000, "state_dict": {}, "hyper_parameters": {}}, stable / "last.ckpt")
    return here


def filled(words: list[str], here: Path, ckpt: Path | None = None, hf: dict | None = None) -> list[str]:
    """The example's words with its placeholders filled in."""
    out = []
    for word in words:
        if word == "...":  # `zoo-prepare ... part=3/8`: the command above it
            out += ["data=local", "data.path=corpus/*.txt"]
            continue
        if ckpt is not None:
            word = re.sub(r"^ckpt=(runs/\.\.\..*|\.\.\.|runs/first|runs/DATE/TIME)$", f"ckpt={ckpt}", word)
        word = word.replace('prompt="..."', "prompt=And God said").replace("prompt=...", "prompt=And God said")
        if hf:
            for name, path in hf.items():
                word = word.replace(f"hf:path/to/{name}", f"hf:{path}")
        out.append("quick" if word == "RECIPE" else word)
    return out


# ---- each tool taken as far as it goes before its first file ---------------------------------------


def _train_validates(args: list[str], capsys) -> str | None:
    """zoo-train's reading of `args` up to its first file: Hydra's command line, every job of a
    sweep composed and validated, local data files checked; the refusal's line, or None."""
    from hydra._internal.utils import get_args_parser  # the reference: Hydra's own parser
    from omegaconf import OmegaConf

    import zoo
    from zoo.cli.gate import check_command_line
    from zoo.cli.hydra_args import in_one_group, parse_hydra_args, sweep_variants, unknown_words, with_overrides
    from zoo.config.errors import ZooError
    from zoo.config.schema.data import DataSource
    from zoo.data.files import check_local_paths

    args = in_one_group(["zoo-train", *args])[1:]
    if unknown_words(args):
        return f"unknown words {unknown_words(args)}"
    parsed = parse_hydra_args(args)
    # what zoo-train hands Hydra, its run directory added, read by Hydra's own strict parser
    handed = with_overrides(["zoo-train", *args], parsed, ["hydra.run.dir='runs/x'"])
    try:
        get_args_parser().parse_args(handed[1:])
    except SystemExit:
        return f"Hydra's parser refuses {handed[1:]}"
    try:
        checked = check_command_line(parsed)
    except ZooError as exc:
        return f"zoo-train: error: {exc}"
    if checked is None:
        return None
    params = OmegaConf.select(checked.cfg, "hydra.sweeper.params", default=None)
    swept = [f"{k}={v}" for k, v in (OmegaConf.to_container(params) if params is not None else {}).items()]
    jobs = sweep_variants(swept + parsed.overrides) if checked.multirun else [parsed.overrides]
    for job in jobs:
        try:
            spec = zoo.validate(zoo.compose(job, config_name=parsed.config_name or "config"))
            if spec.data.source == DataSource.local:
                check_local_paths(spec.data.path, spec.data.val_path)
        except ZooError as exc:
            return f"zoo-train: error: {exc}" + (f" (in the job {' '.join(job)})" if len(jobs) > 1 else "")
    return None


def _tool_reads(tool: str, args: list[str]) -> str | None:
    """The other tools' arguments read by their own parsers and checks (no model loaded)."""
    from zoo.cli.args import parse
    from zoo.config.errors import ZooError

    try:
        if tool == "zoo-bench":
            bench = importlib.import_module("zoo.cli.bench")
            (bench.configure_speculative if bench.asks_speculative(args) else bench.configure)(args)
        elif tool == "zoo-plan":  # one plan at the example's batch (the search for the largest is the slow part)
            from zoo.plan.planner import plan

            plan(*importlib.import_module("zoo.cli.plan").configure(args)[:2])
        elif tool == "zoo-prepare":
            import zoo

            overrides = [a for a in args if a != "-cn" and not a.startswith("part=")]
            name = args[args.index("-cn") + 1] if "-cn" in args else "config"
            overrides = [a for a in overrides if a != name or name == "config"]
            zoo.validate(zoo.compose(overrides, config_name=name))
        elif tool == "zoo-compare":
            compare = importlib.import_module("zoo.cli.compare")
            options = [a for a in args if "=" in a]
            parse(compare.CompareArgs, compare.options_with_baseline(options))
            missing = [a for a in args if "=" not in a and not Path(a).is_dir()]
            if missing:
                return f"not a directory: {missing}"
        else:
            module = importlib.import_module(f"zoo.cli.{tool.removeprefix('zoo-')}")
            schema = {"zoo-generate": "GenerateArgs", "zoo-eval": "EvalArgs", "zoo-export": "ExportArgs"}[tool]
            parse(getattr(module, schema), args, passthrough=getattr(module, "PASSTHROUGH", ("data.",)))
    except ZooError as exc:
        return str(exc)
    return None


def _whole(tool: str, args: list[str], capsys, monkeypatch) -> tuple[int, str]:
    from tests.conftest import run_main

    main = importlib.import_module(f"zoo.cli.{tool.removeprefix('zoo-')}").main
    status, _, err = run_main(main, [tool, *args], capsys, monkeypatch)
    return status, err


# the zoo-plan examples that tests/bench/test_plan.py runs whole, search for the largest batch
# included (`test_every_zoo_plan_example_runs_as_printed`): planned there, not again here
PLANNED_WHOLE = ("memory-planner.md", "zoo-plan --help")


@pytest.mark.parametrize(
    "example",
    [  # a zoo-plan example traces its model with fake tensors (seconds each): the slow tier
        pytest.param(e, id=f"{e.where}: {e.line[:70]}", marks=[pytest.mark.slow] if e.words[0] == "zoo-plan" else [])
        for e in EXAMPLES
        if not (e.words[0] == "zoo-plan" and e.where.endswith(PLANNED_WHOLE))
    ],
)
def test_the_example_is_not_refused(example, workdir, monkeypatch, capsys):
    monkeypatch.chdir(workdir)
    words = filled(example.words, workdir, ckpt=Path("runs/first"))
    tool, args = words[0], words[1:]
    if example.refusal is not None:  # printed with its refusal: the tool says that very line
        assert tool == "zoo-train"
        got = _train_validates(args, capsys)
        assert got == example.refusal, (example.line, got)
        return
    if "init_from=hf:path/to/llama" in example.line or "init_from=hf:path/to/bert" in example.line:
        hf = {
            name: workdir / "hf" / name if (workdir / "hf" / name).exists() else tiny_hf(workdir / "hf" / name, name)
            for name in ("llama", "bert")
        }
        args = filled(example.words, workdir, hf=hf)[1:]
    if tool == "zoo-train" and any(a in ("--help", "-h", "--cfg") for a in args):  # prints only: run whole
        before = set(workdir.rglob("*"))
        status, err = _whole(tool, args, capsys, monkeypatch)
        assert status == 0 and "Traceback" not in err, (example.line, status, err[-2000:])
        assert set(workdir.rglob("*")) == before
        return
    if tool == "zoo-train":
        problem = _train_validates(args, capsys)
    else:
        problem = _tool_reads(tool, args)
    assert problem is None, f"{example.where}: {example.line}\n{problem}"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A finished tiny run: what `ckpt=...` of the inference tools' examples names."""
    import subprocess
    import sys

    from tests.cli.conftest import tiny_overrides

    run = tmp_path_factory.mktemp("examples_run") / "run"
    # positions for the examples' prompt and max_new_tokens (64 by default); RoPE, which the
    # examples of a scaling rule at run time need
    # the weight average (optim.ema), multi-token prediction modules (speculative decoding, export
    # mtp=keep) and a checkpoint at each of steps 3, 6 and 9 (average=3) that the examples read
    overrides = [o for o in tiny_overrides(run) if not o.startswith("trainer.max_steps=")]
    overrides += ["trainer.max_steps=9", "callbacks.save_top_k=-1", "optim.ema=0.9", "task.mtp_depth=1"]
    overrides += ["model.max_seq_len=128", "model/position=rope"]
    done = subprocess.run(
        [sys.executable, "-m", "zoo.cli.train", *overrides], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return run


@pytest.fixture(scope="module")
def tiny_recall_run(tmp_path_factory):
    """A finished tiny run on data=recall: what `ckpt=...` of the recall probe's examples names."""
    import subprocess
    import sys

    from tests.cli.conftest import tiny_overrides

    run = tmp_path_factory.mktemp("examples_recall_run") / "run"
    overrides = [*tiny_overrides(run), "data=recall", "tokenizer=char", "data.seq_len=65", "model.max_seq_len=128"]
    overrides += ["data.recall_examples=300", "model.vocab_size=262"]  # conf/data/recall.yaml's 256 symbols
    done = subprocess.run(
        [sys.executable, "-m", "zoo.cli.train", *overrides], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return run


def on_this_machine(example: Example) -> bool:
    import torch

    return "device=cuda" not in example.line or torch.cuda.is_available()


@pytest.mark.slow
@pytest.mark.parametrize(
    "example", [e for e in EXAMPLES if e.words[0] in INFERENCE], ids=lambda e: f"{e.where}: {e.line[:70]}"
)
def test_the_inference_example_runs(example, tiny_run, workdir, tmp_path, monkeypatch, capsys, request):
    """zoo-generate, zoo-eval and zoo-export as printed, on a tiny checkpoint (the recall
    probe's on a run trained on data=recall), each in a fresh directory holding the files it
    names: exit 0, no traceback."""
    import shutil

    if not on_this_machine(example):
        pytest.skip("a CUDA example on a machine without one (its arguments are read in the fast tier)")
    for name in ("prompts.txt", "phrases.txt", "held_out.jsonl"):
        shutil.copy(workdir / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    run = request.getfixturevalue("tiny_recall_run") if "probe=recall" in example.line else tiny_run
    words = filled(example.words, tmp_path, ckpt=run)
    status, err = _whole(words[0], words[1:], capsys, monkeypatch)
    assert status == 0 and "Traceback" not in err, f"{example.where}: {example.line}\n{err[-2000:]}"
