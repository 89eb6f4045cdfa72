"""`zoo-prepare` with zoo-train's overrides, as two array tasks, makes the entry that `zoo-train`
with those overrides then maps instead of preparing; bad input is one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli.conftest import tiny_overrides


def zoo_prepare(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zoo.cli.prepare", *args], capture_output=True, text=True, timeout=300, env=env
    )


@pytest.mark.slow
def test_array_tasks_prepare_what_zoo_train_then_maps(tmp_path, zoo_train_here, monkeypatch):
    """The two array tasks are processes of their own; the zoo-train that maps their entry is
    its main() in this process."""
    import os

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i}: some words of a document\n" for i in range(1500)))
    data = ["data=local", f"data.path={corpus}", "tokenizer=sentencepiece_bpe", "tokenizer.vocab_size=120"]
    env = dict(os.environ, ZOO_CACHE=str(tmp_path / "cache"))
    first = zoo_prepare(*data, "part=1/2", env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    assert json.loads(first.stdout)["done"] is True
    last = zoo_prepare(*data, "part=0/2", env=env)
    assert last.returncode == 0, last.stderr[-2000:]
    made = json.loads(last.stdout)
    assert made["built"] and made["documents"]["train"] + made["documents"]["validation"] == 1500

    run = tmp_path / "run"
    args = [o for o in tiny_overrides(run) if not o.startswith(("tokenizer=", "data.max_examples"))]
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "cache"))
    result = zoo_train_here(*args, *data)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((run / "summary.json").read_text())["prepared_data"] == made["prepared"]
    assert f"prepared data: {made['prepared']} (found in the cache" in (run / "train.log").read_text()


def test_bad_input_is_one_line(tmp_path, cli_here, monkeypatch):
    """zoo-prepare's main() in this process (the tests above and below run it as a process)."""
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "cache"))
    for args, expected in (
        (["part=x"], "part=x: give I/N"),
        (["part=2/2"], "I must be in 0 .. N-1"),
        (["-cn", "numbers_seq2seq"], "zoo-prepare makes token shards for causal_lm and masked_lm"),
        (["data=local", f"data.path={tmp_path / 'missing.txt'}"], "no such file"),
    ):
        result = cli_here("prepare", *args)
        assert result.returncode == 2, (args, result.stderr[-2000:])
        assert "Traceback" not in result.stderr
        (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("zoo-prepare: error:")]
        assert expected in line, line


@pytest.mark.slow
def test_sigterm_stops_a_preparation_with_one_line_and_keeps_its_shards(tmp_path):
    """SIGTERM used to end zoo-prepare without a word (and Ctrl-C with a traceback); the shards
    finished so far stay in ENTRY.partial for the next run."""
    import os
    import signal

    from tests.training.distributed.conftest import wait_for

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "".join(f"line {i}: some words of a document, and more words after them\n" for i in range(400_000))
    )
    env = dict(os.environ, ZOO_CACHE=str(tmp_path / "cache"))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zoo.cli.prepare",
            "data=local",
            f"data.path={corpus}",
            "tokenizer=byte",
            "data.num_proc=1",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: any((tmp_path / "cache").glob("prepared/*.partial/*.bin.json")), 240, "a finished shard", proc)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "zoo-prepare: stopped by SIGTERM"
    assert any((tmp_path / "cache").glob("prepared/*.partial/*.bin.json"))  # kept for the next run


# zoo-train with the watchdog's time (interrupt.HARD_EXIT_S) cut to half a second
SHORT_WATCHDOG = (
    "import runpy, sys\n"
    "import zoo.training.signals.interrupt as interrupt\n"
    "interrupt.HARD_EXIT_S = 0.5\n"
    "sys.argv = ['zoo-train', *sys.argv[1:]]\n"
    "runpy.run_module('zoo.cli.train', run_name='__main__', alter_sys=True)\n"
)


@pytest.mark.slow
def test_a_run_whose_data_a_pool_of_workers_prepared_ends_in_success_without_a_traceback(tmp_path):
    """Token shards tokenized by two workers, which the pool ends with SIGTERM when they are done:
    the workers used to keep the run's handler, printed its StopNow's traceback, and their signal
    reached the run's watch, whose watchdog then ended the run HARD_EXIT_S later with exit 143
    (10 s: a run on a large corpus, once the data was prepared, died as though stopped)."""
    import os
    from pathlib import Path

    from zoo.data.prepared import DOCS_PER_SHARD

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i} of a document\n" for i in range(2 * DOCS_PER_SHARD + 10_000)))
    run = tmp_path / "run"
    args = [o for o in tiny_overrides(run) if not o.startswith(("data.max_examples", "trainer.max_steps"))]
    args += ["data=local", f"data.path={corpus}", "data.num_proc=2", "trainer.max_steps=30"]
    result = subprocess.run(
        [sys.executable, "-c", SHORT_WATCHDOG, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
        env=dict(os.environ, ZOO_CACHE=str(tmp_path / "cache")),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["global_step"] == 30
    index = json.loads((Path(summary["prepared_data"]) / "index.json").read_text())
    assert len(index["splits"]["train"]["shards"]) >= 2  # tokenized by a pool of two workers
