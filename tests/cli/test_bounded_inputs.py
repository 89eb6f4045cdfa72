"""Inputs that ended in a traceback, a long wait or an unclear line: each now gets one line and a
non-zero status (or, for a prompt with a tab or an escape character, its continuation), before
the work they would have spoiled. Each test replays the input as a user gives it, through the
tool's main() in this process."""

from __future__ import annotations

import json
import pickle
import time
from pathlib import Path

import pytest
import torch

from tests.cli.conftest import missed, stderr_lines
from tests.conftest import tiny


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    """A decoder-only checkpoint with learned positions (32) and the byte tokenizer, saved as
    zoo-train saves one (hyper_parameters, state_dict, zoo_tokenizer)."""
    from zoo.config.facts.tasks import task_of_family
    from zoo.config.schema.model import Family
    from zoo.data.tokenizers.byte import ByteTokenizer
    from zoo.data.tokenizers.state import tokenizer_state
    from zoo.tasks import TASKS

    kind = task_of_family(Family.decoder_only)
    task = TASKS[kind](model=tiny(vocab_size=300, max_seq_len=32), task={"kind": kind.value})
    path = tmp_path_factory.mktemp("ckpt") / "tiny.ckpt"
    torch.save(
        {
            "hyper_parameters": dict(task.hparams),
            "state_dict": task.state_dict(),
            "zoo_tokenizer": tokenizer_state(ByteTokenizer()),
        },
        path,
    )
    return path


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "held_out.jsonl"
    path.write_text("".join(json.dumps({"text": "hello world " * 20}) + "\n" for _ in range(20)))
    return path


def one_line(result, tool: str, *fragments: str, status: int = 2) -> str:
    assert missed(result, tool, *fragments, status=status) == []
    return stderr_lines(result)


@pytest.mark.parametrize("prompt", ["a\tb", "a\x1b[31mb", "bell\x07"])
def test_a_prompt_with_a_tab_or_an_escape_is_continued_as_given(prompt, ckpt, cli_here):
    result = cli_here("generate", f"ckpt={ckpt}", f"prompt={prompt}", "max_new_tokens=2")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stdout.startswith(prompt)


def test_a_control_character_in_a_number_is_one_line(ckpt, cli_here):
    result = cli_here("generate", f"ckpt={ckpt}", "prompt=hi", "max_new_tokens=[\x1b")
    assert missed(result, "generate", "max_new_tokens=") == []


def test_a_prompt_that_fills_the_context_is_told_to_shorten_not_max_new_tokens_0(ckpt, cli_here):
    full = cli_here("generate", f"ckpt={ckpt}", "prompt=" + "x" * 40)
    one_line(
        full,
        "generate",
        "the prompt (40 tokens) fills the learned positions (model.max_seq_len=32)",
        "shorten it to 31 tokens at most",
    )
    assert "max_new_tokens=0" not in full.stderr
    part = cli_here("generate", f"ckpt={ckpt}", "prompt=" + "x" * 20)
    one_line(part, "generate", "max_new_tokens=12 is the most for this prompt")


def test_a_huge_model_in_a_checkpoint_is_refused_before_it_is_built(ckpt, tmp_path, cli_here):
    """d_model 2^20 and 1,024 layers beside a tiny model's weights: petabytes, were it built."""
    data = torch.load(ckpt, map_location="cpu", weights_only=True)
    data["hyper_parameters"]["model"] = dict(
        data["hyper_parameters"]["model"], d_model=2**20, n_heads=2**10, n_layers=2**10
    )
    huge = tmp_path / "huge.ckpt"
    torch.save(data, huge)
    started = time.monotonic()
    for tool, args in (("generate", ["prompt=hi"]), ("eval", ["seq_len=16"])):
        result = cli_here(tool, f"ckpt={huge}", *args)
        one_line(
            result, tool, f"checkpoint {huge}: its config describes a model of", "model.d_model", "holds 16,706 weights"
        )
    assert time.monotonic() - started < 20


def test_zoo_eval_refuses_a_window_past_the_positions(ckpt, text_file, cli_here):
    given = cli_here("eval", f"ckpt={ckpt}", f"data={text_file}", "seq_len=100000")
    one_line(
        given,
        "eval",
        "seq_len=100000 is past the model's learned positions (model.max_seq_len=32)",
        "give seq_len=32 or less",
    )
    recorded = cli_here("eval", f"ckpt={ckpt}", f"data={text_file}")  # the data config's default, 256
    one_line(recorded, "eval", "the checkpoint's data.seq_len=256 is past", "give seq_len=32 or less")
    ok = cli_here("eval", f"ckpt={ckpt}", f"data={text_file}", "seq_len=32")
    assert ok.returncode == 0, ok.stderr[-3000:]


def test_a_malformed_jsonl_names_its_line(ckpt, tmp_path, cli_here):
    bad = tmp_path / "bad.jsonl"
    rows = [json.dumps({"text": "hello world " * 20}) for _ in range(5)]
    bad.write_text("\n".join([*rows, '{"text": "cut off', *rows]) + "\n")
    result = cli_here("eval", f"ckpt={ckpt}", f"data={bad}", "seq_len=16")
    assert missed(result, "eval", f"{bad}, line 6: not valid JSON", "each line of a .jsonl file is one object") == []
    listed = tmp_path / "listed.jsonl"
    listed.write_text("\n".join([*rows, "[1, 2]"]) + "\n")
    assert (
        missed(
            cli_here("eval", f"ckpt={ckpt}", f"data={listed}", "seq_len=16"),
            "eval",
            f"{listed}, line 6: a list, not an object",
        )
        == []
    )


@pytest.mark.parametrize(
    "tool, args",
    [
        ("eval", ["ckpt={ckpt}", "data={data}"]),
        ("bench", ["model.n_layers=1"]),
        ("plan", ["model.n_layers=1"]),
    ],
)
def test_out_a_directory_is_refused_before_the_work(tool, args, ckpt, text_file, tmp_path, cli_here):
    taken = tmp_path / "results"
    taken.mkdir()
    argv = [a.format(ckpt=ckpt, data=text_file) for a in args]
    started = time.monotonic()
    one_line(cli_here(tool, *argv, f"out={taken}"), tool, f"out={taken} is a directory", f"e.g. out={taken}/")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    one_line(cli_here(tool, *argv, f"out={blocked}/x.json"), tool, f"{blocked} is a file, not a directory")
    assert time.monotonic() - started < 30  # refused before evaluating, timing or planning


def test_zoo_export_refuses_an_out_it_cannot_make_before_loading(ckpt, tmp_path, cli_here):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert (
        missed(
            cli_here("export", f"ckpt={ckpt}", f"out={blocked}/exported"),
            "export",
            f"{blocked} is a file, not a directory",
        )
        == []
    )


def test_infinities_in_metrics_csv_mark_the_run_damaged(tmp_path, cli_here):
    sweep = tmp_path / "sweep"
    for job, rows in (("0", "0,100,2.0\n1,200,1.5\n"), ("1", "inf,100,2.0\n"), ("2", "0,1e999,2.0\n")):
        (sweep / job / ".hydra").mkdir(parents=True)
        (sweep / job / ".hydra" / "overrides.yaml").write_text(f"- seed={job}\n")
        (sweep / job / ".hydra" / "config.yaml").write_text(f"seed: {job}\n")
        (sweep / job / "metrics.csv").write_text("step,tokens_seen,val/loss\n" + rows)
    result = cli_here("compare", str(sweep))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"{sweep / '1' / 'metrics.csv'} is damaged (step is 'inf', not a count)" in result.stderr
    assert f"{sweep / '2' / 'metrics.csv'} is damaged (tokens_seen is '1e999' at step 0, not a count)" in result.stderr


class _Payload:
    """Unpickling this runs `Path(marker).touch()`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_init_from_pickled_weights_is_refused_and_never_unpickled(tmp_path, cli_here):
    """A save_pretrained directory with pytorch_model.bin and no safetensors: refused on one
    line saying what to do; the pickle's payload never ran."""
    marker = tmp_path / "ran"
    weights = tmp_path / "hf"
    weights.mkdir()
    (weights / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "vocab_size": 64,
                "hidden_size": 16,
                "num_attention_heads": 2,
                "num_hidden_layers": 1,
                "intermediate_size": 32,
            }
        )
    )
    (weights / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(marker)))
    result = cli_here("train", f"init_from=hf:{weights}", f"hydra.run.dir={tmp_path / 'run'}")
    one_line(
        result,
        "train",
        "its weights are pytorch_model.bin, a pickle, which zoo never unpickles",
        "save_pretrained(DIR, safe_serialization=True)",
    )
    assert not marker.exists() and not (tmp_path / "run").exists()
    from zoo.interop.hf.pretrained import load_pretrained

    with pytest.raises(Exception, match="never unpickles"):
        load_pretrained(weights)
    assert not marker.exists()


@pytest.mark.parametrize("size", ["model.n_layers=100000", "model.d_model=100000000000"])
def test_zoo_bench_refuses_a_model_the_machine_cannot_hold_before_building_it(size, cli_here):
    started = time.monotonic()
    result = cli_here("bench", size, "model.n_heads=1")
    one_line(result, "bench", "parameters:", "more than this machine's", "lower it")
    assert time.monotonic() - started < 20  # not built: building took minutes or failed in torch


def test_a_refusal_that_depends_on_another_key_names_it(tmp_path, cli_here):
    """A window past the learned positions is the window's or the table's: both keys are named."""
    result = cli_here("train", "data.seq_len=4096", f"hydra.run.dir={tmp_path / 'run'}")
    one_line(
        result,
        "train",
        "data.seq_len (4096) is longer than learned positions allow (model.max_seq_len=256)",
        "lower data.seq_len or raise model.max_seq_len=4096",
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("key", ["trainer.max_steps", "trainer.max_epochs"])
def test_a_run_length_past_what_a_run_can_count_is_refused_before_it_starts(key, tmp_path, cli_here):
    """10^23 steps trained until Lightning's progress bar overflowed converting the time left."""
    result = cli_here("train", f"{key}=100000000000000000000000", f"hydra.run.dir={tmp_path / 'run'}")
    one_line(result, "train", f"{key}=100000000000000000000000 is past what a run can count: at most 1,000,000,000,000")
    assert not (tmp_path / "run").exists()
