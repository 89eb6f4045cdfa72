"""`zoo-eval ckpt=RUN harness=TASKS`: a table printed, the results in a new file of the run's
harness/ directory each time; a task name the harness does not know is one line and exit 2,
before the checkpoint loads."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("lm_eval")

from tests.cli.conftest import tiny_overrides  # noqa: E402


@pytest.fixture
def fake_ckpt(tmp_path):
    """A file torch.save wrote, in a run's checkpoints/: what zoo-eval locates before it loads."""
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir(parents=True)
    torch.save({}, ckpt)
    return ckpt


@pytest.mark.slow  # a name not built in: the harness indexes its own thousands of tasks (~15 s)
def test_an_unknown_task_is_one_line_and_exit_2(fake_ckpt, cli_here):
    done = cli_here("eval", f"ckpt={fake_ckpt}", "harness=kjv_cloze,kjv_clozz")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "zoo-eval: error: harness task 'kjv_clozz' is not known; did you mean "
        "kjv_cloze? built in: kjv_cloze, kjv_next_verse, numbers_translation (and "
        "every task of lm-evaluation-harness)"
    ]
    assert not (fake_ckpt.parent.parent / "harness").exists()


@pytest.mark.parametrize(
    "extra, refusal",
    [
        (["data=x.txt"], "no such file"),  # data= is checked first, as without harness=
        (["seq_len=16"], "harness= evaluates tasks, not a dataset"),
        (["limit=0"], "limit must be a number of examples per task (1 or more) or a fraction of each"),
        (["limit=inf"], "limit must be a number of examples per task (1 or more) or a fraction of each"),
        (["limit=-inf"], "limit must be a number of examples per task (1 or more) or a fraction of each"),
        (["limit=nan"], "limit must be a number of examples per task (1 or more) or a fraction of each"),
        (["limit=2.5"], "limit=2.5: give a whole number of examples per task, or a fraction of each below 1"),
        (["num_fewshot=-1"], "num_fewshot must be 0 or more examples shown before each question"),
        (["harness=a,,b"], "give task names separated by commas"),
        (["devices=2"], "harness= runs on one device"),
        (["limit_batches=3"], "drop data=, data.*, seq_len= and limit_batches="),
    ],
)
def test_bad_combinations_are_one_line(fake_ckpt, cli_here, extra, refusal):
    args = [f"ckpt={fake_ckpt}", *(extra if extra[0].startswith("harness=") else ["harness=kjv_cloze", *extra])]
    done = cli_here("eval", *args)
    assert done.returncode == 2 and refusal in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_limit_without_harness_is_refused(fake_ckpt, cli_here):
    done = cli_here("eval", f"ckpt={fake_ckpt}", "limit=5")
    assert done.returncode == 2 and "limit= and num_fewshot= apply to harness=TASKS" in done.stderr


@pytest.mark.slow
def test_a_trained_run_gets_its_task_scores_in_a_new_file_each_time(tmp_path, cli_here):
    run = tmp_path / "run"
    assert cli_here("train", *tiny_overrides(run)).returncode == 0
    results = []
    for _ in range(2):
        done = cli_here("eval", f"ckpt={run}", "harness=kjv_cloze,kjv_next_verse", "limit=5", "batch_size=4")
        assert done.returncode == 0, done.stderr[-2000:]
        header, rule, *rows = done.stdout.strip().splitlines()
        assert header.split() == ["task", "metric", "value", "stderr"]
        assert {tuple(r.split()[:2]) for r in rows} == {
            ("kjv_cloze", "perplexity"),
            ("kjv_cloze", "acc"),
            ("kjv_next_verse", "acc"),
            ("kjv_next_verse", "acc_norm"),
        }
        results.append(done.stderr)
    files = sorted((run / "harness").glob("harness-*.json"))
    assert len(files) == 2  # the second run never overwrote the first
    record = json.loads(files[0].read_text())
    assert record["tasks"] == ["kjv_cloze", "kjv_next_verse"] and record["limit"] == 5
    assert 0.0 <= record["metrics"]["harness/kjv_next_verse/acc"] <= 1.0
    assert record["n_samples"]["kjv_cloze"]["effective"] == 5


def test_more_few_shot_examples_than_the_task_holds_is_one_line(fake_ckpt, cli_here):
    """The harness draws them with random.sample ("Sample larger than population", a traceback);
    refused when the tasks load, before the checkpoint does."""
    done = cli_here("eval", f"ckpt={fake_ckpt}", "harness=kjv_cloze", "num_fewshot=500")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "zoo-eval: error: num_fewshot=500: harness task kjv_cloze has 199 examples to show before a "
        "question; give num_fewshot=199 or less"
    ]
    assert not (fake_ckpt.parent.parent / "harness").exists()


UNREACHABLE = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0"}  # a closed port


@pytest.mark.slow  # a process of its own (the Hub's address is read at import); the harness indexes its tasks
def test_a_hub_task_without_the_hub_is_one_line_and_exit_1(fake_ckpt):
    """It used to retry five times (31 s of waiting) and end in a 50-line traceback."""
    import os
    import subprocess
    import sys
    import time

    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "zoo.cli.eval", f"ckpt={fake_ckpt}", "harness=arc_easy", "limit=2"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **UNREACHABLE},
    )
    seconds = time.perf_counter() - started
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(
        "zoo-eval: error: harness task(s) arc_easy read their datasets from the Hugging Face Hub "
        "(http://127.0.0.1:9), which cannot be reached"
    ) and line.endswith("or score the built-in tasks (kjv_cloze, kjv_next_verse, numbers_translation)")
    assert "Retrying" not in done.stderr and seconds < 120
