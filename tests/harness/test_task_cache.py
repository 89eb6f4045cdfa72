"""The harness task cache is data zoo wrote, checked before the harness reads it: a task YAML
changed to run code (a Jinja expression, a `!function` beside a planted Python file), a file
added, or a link is said on one line and the tasks are built again, whether zoo-eval or a
training run's downstream scoring reads them; the directory gets the umask's permissions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from tests.cli.conftest import tiny_overrides  # noqa: E402
from zoo.data.errors import DataError  # noqa: E402
from zoo.data.integrity import file_digest  # noqa: E402
from zoo.harness import tasks  # noqa: E402

CHECKOUT = Path(__file__).resolve().parents[2]

SHORT = [  # a model of 16 positions trained for 2 steps: seconds, and numbers_translation's 32 new tokens do not fit
    "model.max_seq_len=16",
    "data.seq_len=16",
    "trainer.max_steps=2",
    "trainer.val_check_interval=2",
    "callbacks.checkpoint_every_n_steps=2",
    "scheduler.warmup_steps=1",
]


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    """A finished tiny run (trained in this process, once for the module)."""
    import zoo

    run = tmp_path_factory.mktemp("short") / "run"
    zoo.train(zoo.compose([o for o in tiny_overrides(run) if not o.startswith("hydra.")] + SHORT), run)
    return run


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache of this test's own, holding the built kjv_cloze task."""
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "cache"))
    return tasks.materialize(["kjv_cloze"])


def _jinja(directory, marker):
    """doc_to_text that creates `marker` when rendered; the manifest rewritten to match."""
    yaml = directory / "kjv_cloze.yaml"
    payload = "{{ cycler.__init__.__globals__.os.system('touch " + str(marker) + "') }}{{context}}"
    yaml.write_text(yaml.read_text().replace('doc_to_text: "{{context}}"', f'doc_to_text: "{payload}"'))
    manifest = json.loads((directory / tasks.MANIFEST).read_text())
    manifest["files"]["kjv_cloze.yaml"] = file_digest(yaml)
    (directory / tasks.MANIFEST).write_text(json.dumps(manifest))


def _function(directory, marker):
    """doc_to_text a `!function` of a Python file planted beside the YAML, which creates `marker`."""
    (directory / "planted.py").write_text(f"open({str(marker)!r}, 'w').close()\ndef text(doc):\n    return 'x'\n")
    yaml = directory / "kjv_cloze.yaml"
    yaml.write_text(yaml.read_text().replace('doc_to_text: "{{context}}"', "doc_to_text: !function planted.text"))


def _link(directory, marker):
    """The YAML a link to a file elsewhere that carries the Jinja payload."""
    elsewhere = directory.parent / "elsewhere.yaml"
    payload = "{{ cycler.__init__.__globals__.os.system('touch " + str(marker) + "') }}{{context}}"
    elsewhere.write_text(
        (directory / "kjv_cloze.yaml").read_text().replace('doc_to_text: "{{context}}"', f'doc_to_text: "{payload}"')
    )
    (directory / "kjv_cloze.yaml").unlink()
    (directory / "kjv_cloze.yaml").symlink_to(elsewhere)


@pytest.mark.parametrize(
    "plant, said",
    [
        (_jinja, "kjv_cloze.yaml is not the task zoo writes"),
        (_function, "it holds planted.py, which zoo did not write"),
        (_link, "kjv_cloze.yaml is a link"),
    ],
)
def test_a_planted_task_never_runs_in_zoo_eval_and_is_built_again(short_run, cache, tmp_path, cli_here, plant, said):
    marker = tmp_path / "MARKER"
    plant(cache, marker)
    done = cli_here("eval", f"ckpt={short_run}", "harness=kjv_cloze", "limit=2", "batch_size=2")
    assert done.returncode == 0, done.stderr[-2000:]
    assert not marker.exists()
    notes = [line for line in done.stderr.splitlines() if "the harness task cache" in line]
    assert notes == [f"zoo: the harness task cache {cache}: {said}; building it again"]
    assert (cache / "kjv_cloze.yaml").read_text() == tasks._task_yaml("kjv_cloze", cache)
    assert sorted(p.name for p in cache.iterdir()) == ["kjv_cloze.jsonl", "kjv_cloze.yaml", tasks.MANIFEST]
    assert {row.split()[1] for row in done.stdout.strip().splitlines()[2:]} == {"acc", "perplexity"}


@pytest.mark.parametrize("mask, mode", [(0o002, 0o775), (0o022, 0o755)])
def test_the_task_cache_follows_the_umask(tmp_path, mask, mode):
    """Made in a temporary directory (0700) and renamed into the cache: a team's shared cache
    must stay readable to the others."""
    before = os.umask(mask)
    try:
        built = tasks.materialize(["kjv_cloze"], cache_dir=str(tmp_path))
    finally:
        os.umask(before)
    assert built.stat().st_mode & 0o777 == mode


def test_a_damaged_entry_in_a_read_only_cache_is_refused(tmp_path, monkeypatch):
    """It cannot be built again: refused on one line naming ZOO_CACHE."""
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "cache"))
    built = tasks.materialize(["kjv_cloze"])
    _jinja(built, tmp_path / "MARKER")
    root = built.parent
    os.chmod(root, 0o555)
    try:
        if os.access(root, os.W_OK):
            pytest.skip("this user writes read-only directories (root)")
        with pytest.raises(DataError, match="cannot be written .*; point ZOO_CACHE at a writable directory"):
            tasks.materialize(["kjv_cloze"])
    finally:
        os.chmod(root, 0o755)
    assert "os.system" in (built / "kjv_cloze.yaml").read_text()  # left as it was found, never read


def test_a_generating_task_past_the_models_positions_is_one_line(short_run, cli_here):
    before = sorted((short_run / "harness").glob("*.json"))
    done = cli_here("eval", f"ckpt={short_run}", "harness=numbers_translation", "limit=2")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "zoo-eval: error: harness task numbers_translation generates up to 32 tokens after its "
        "prompt, past the checkpoint's positions (model.max_seq_len=16); score it on a model whose "
        "model.max_seq_len is 32 or more, or leave the task out"
    ]
    assert sorted((short_run / "harness").glob("*.json")) == before  # no results file


def test_a_generating_task_past_the_positions_is_refused_before_training(tmp_path, cli_here):
    run = tmp_path / "run"
    done = cli_here("train", *tiny_overrides(run), *SHORT, "callbacks.downstream=[numbers_translation]")
    assert done.returncode == 2
    assert "harness task numbers_translation generates up to 32 tokens after its prompt" in done.stderr
    assert not (run / "checkpoints").exists()


@pytest.mark.slow  # a process of its own: what git writes goes to the process's stderr, not to Python's
def test_no_git_runs_in_a_directory_outside_git(short_run, tmp_path):
    """The harness's simple_evaluate runs `git describe` in the working directory to record a
    commit, and git says "fatal: not a git repository" outside one; zoo calls the harness's
    evaluation itself, which runs no git."""
    outside = tmp_path / "outside"
    outside.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "zoo.cli.eval", f"ckpt={short_run}", "harness=kjv_cloze", "limit=2"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=outside,
        env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path), "PYTHONPATH": str(CHECKOUT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "git" not in done.stderr and "kjv_cloze" in done.stdout
