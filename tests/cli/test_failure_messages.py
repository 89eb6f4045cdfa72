"""Failures a user fixes outside zoo come as one line naming the file and what to do, through the
real tools: a full disk during a save, a read-only cache (which still serves what it holds),
memory that cannot be had, a damaged run record in a sweep, a report path that is a file, a
checkpoint without its task or with a config zoo cannot build, and a decoding length whose
key/value cache cannot fit. Two sweeps started in the same second get a directory each."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest
import torch

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.forked import Forked


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    return probe.returncode == 0


needs_namespaces = pytest.mark.skipif(
    not _unshare_works(), reason="needs `unshare -rm` (user and mount namespaces) for a full or read-only mount"
)


def _in_namespace(script: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """`script` (sh) as namespace root with a private mount table: mounts it makes vanish after."""
    return subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=timeout)


def _error_lines(stderr: str, tool: str = "zoo-train") -> list[str]:
    assert "Traceback" not in stderr, stderr[-3000:]
    return [line for line in stderr.splitlines() if line.startswith(f"{tool}: error:")]


def _train_cmd(*args: str) -> str:
    return " ".join(shlex.quote(a) for a in [sys.executable, "-m", "zoo.cli.train", *args])


@pytest.fixture(scope="module")
def rope_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("rope") / "run"
    result = zoo_train(*tiny_overrides(run), "model/position=rope")
    assert result.returncode == 0, result.stderr[-2000:]
    return run


@needs_namespaces
@pytest.mark.slow
def test_a_full_disk_during_a_save_is_one_line_and_failed_json_says_so(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    run = disk / "run"
    # the first checkpoint (weights + AdamW state of a 2-layer d_model 256 model: ~20 MB) does not fit
    script = (
        f"mount -t tmpfs -o size=8m tmpfs {disk} && "
        + _train_cmd(*tiny_overrides(run), "model.d_model=256", "model.n_layers=2")
        + f"; status=$?; cat {run}/failed.json; exit $status"
    )
    result = _in_namespace(script)
    assert result.returncode == 1, result.stderr[-3000:]
    (line,) = _error_lines(result.stderr)
    assert "no space left on the device" in line and "no checkpoint had been written yet" in line
    assert "no space left" in json.loads(result.stdout[result.stdout.index("{") :])["error"]


@needs_namespaces
@pytest.mark.slow
def test_a_read_only_cache_serves_what_it_holds_and_names_itself_otherwise(tmp_path):
    cache = tmp_path / "cache"
    kjv = ["tokenizer=sentencepiece_bpe", "tokenizer.vocab_size=300", "data=kjv"]
    env = {"ZOO_CACHE": str(cache)}
    tiny = lambda run: [o for o in tiny_overrides(run) if o != "tokenizer=byte"]  # noqa: E731
    warm = zoo_train(*tiny(tmp_path / "warm"), *kjv, env=env)
    assert warm.returncode == 0, warm.stderr[-2000:]
    read_only = f"mount --bind {cache} {cache} && mount -o remount,bind,ro {cache} && ZOO_CACHE={cache} "
    served = _in_namespace(read_only + _train_cmd(*tiny(tmp_path / "ro"), *kjv))
    assert served.returncode == 0, served.stderr[-3000:]

    def learned(run):  # tokens_per_s left out: a rate, logged once a second passes, is a timing
        return {
            k: v
            for k, v in json.loads((tmp_path / run / "summary.json").read_text())["metrics"].items()
            if k != "tokens_per_s"
        }

    assert learned("ro") == learned("warm")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i} of a local corpus\n" for i in range(400)))
    local = _in_namespace(
        read_only + _train_cmd(*tiny_overrides(tmp_path / "local"), "data=local", f"data.path={corpus}")
    )
    assert local.returncode == 2
    (line,) = _error_lines(local.stderr)
    assert "cache cannot be written" in line and str(cache) in line and "ZOO_CACHE" in line


@pytest.mark.slow
def test_memory_that_cannot_be_had_is_one_line(tmp_path):
    # the limit is set by the child itself before zoo-train starts: a preexec_fn would run Python
    # between fork and exec, which can deadlock in a process with threads (as a test worker is)
    limited = (
        "import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
        "sys.argv = ['zoo-train', *sys.argv[1:]]; runpy.run_module('zoo.cli.train', run_name='__main__')"
    )
    args = [*tiny_overrides(tmp_path / "run"), "model.d_model=2048", "model.n_heads=32", "model.n_layers=8"]
    result = subprocess.run([sys.executable, "-c", limited, *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    (line,) = _error_lines(result.stderr)
    assert "out of host memory" in line and "data.max_device_batch_size" in line


@pytest.mark.slow
def test_compare_names_a_damaged_record_and_reports_the_rest(rope_run, tmp_path):
    sweep = tmp_path / "sweep"
    for name in ("a", "b", "c"):
        shutil.copytree(rope_run, sweep / name)
    (sweep / "a" / "summary.json").write_text("[1, 2]")
    summary = json.loads((sweep / "b" / "summary.json").read_text())
    summary["metrics"]["val/loss"] = "abc"
    (sweep / "b" / "summary.json").write_text(json.dumps(summary))
    result = subprocess.run(
        [sys.executable, "-m", "zoo.cli.compare", str(sweep)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 2
    assert str(sweep / "a" / "summary.json") in warnings[0] and "not an object" in warnings[0]
    assert str(sweep / "b" / "summary.json") in warnings[1] and "'val/loss'" in warnings[1]
    report = (sweep / "compare" / "report.md").read_text()
    assert "1 finished, 2 damaged" in report
    taken = tmp_path / "taken"
    taken.write_text("keep me")
    result = subprocess.run(
        [sys.executable, "-m", "zoo.cli.compare", str(sweep), f"out={taken}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    (line,) = _error_lines(result.stderr, "zoo-compare")
    assert f"out={taken} is a file" in line and taken.read_text() == "keep me"


@pytest.mark.slow
def test_a_run_that_never_started_is_no_arm_of_the_comparison(rope_run, tmp_path, cli_here):
    """An arm of a sweep refused after it took its directory (a checkpoint to resume that is not
    there) leaves failed.json and no metrics: zoo-compare names it and leaves it out."""
    sweep = tmp_path / "sweep"
    shutil.copytree(rope_run, sweep / "done")
    refused = cli_here(
        "train",
        "-m",
        *tiny_overrides(),
        "model/position=alibi",
        f"ckpt_path={tmp_path / 'missing.ckpt'}",
        f"hydra.sweep.dir={sweep}",
        "hydra.sweep.subdir=refused",
    )
    assert refused.returncode != 0 and (sweep / "refused" / "failed.json").is_file(), refused.stderr[-2000:]
    result = cli_here("compare", str(sweep))
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [ln for ln in result.stderr.splitlines() if "never started" in ln]
    assert str(sweep / "refused") in line and "missing.ckpt" in line
    report = (sweep / "compare" / "report.md").read_text()
    assert "alibi" not in report.split("## Runs without a final result")[0]
    assert json.loads(result.stdout)["arms"] == 1


@pytest.mark.parametrize("damage", ["no task", "invalid model", "weights of another size", "tokenizer path"])
@pytest.mark.slow
def test_a_damaged_checkpoint_is_one_line_naming_it(damage, rope_run, tmp_path, cli_here):
    data = torch.load(rope_run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    expected = {
        "no task": "its hyper_parameters lack task",
        "invalid model": "holds a config zoo cannot build: model.d_model must be a positive integer",
        "weights of another size": "its weights do not fit its own config (size mismatch",
        "tokenizer path": "its tokenizer entry '../x' is not a file of the tokenizer",
    }[damage]
    if damage == "no task":
        del data["hyper_parameters"]["task"]
    elif damage == "invalid model":
        data["hyper_parameters"]["model"]["d_model"] = -1
    elif damage == "weights of another size":
        data["hyper_parameters"]["model"]["d_model"] = 64
    else:
        data["zoo_tokenizer"]["../x"] = b"1"
    ckpt = tmp_path / "damaged.ckpt"
    torch.save(data, ckpt)
    result = cli_here("eval", f"ckpt={ckpt}")
    assert result.returncode == 2
    (line,) = _error_lines(result.stderr, "zoo-eval")
    assert f"checkpoint {ckpt}" in line and expected in line, line
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_a_decoding_length_whose_cache_cannot_fit_is_refused_before_decoding(rope_run, cli_here):
    ckpt = rope_run / "checkpoints" / "last.ckpt"
    for extra in ([], ["static_cache=true"]):
        result = cli_here("generate", f"ckpt={ckpt}", "prompt=the", "max_new_tokens=1000000000000", *extra)
        assert result.returncode == 2
        (line,) = _error_lines(result.stderr, "zoo-generate")
        assert "key/value cache, more than the" in line and "lower max_new_tokens" in line


@pytest.mark.slow
def test_two_sweeps_started_in_the_same_second_get_a_directory_each(tmp_path):
    from datetime import datetime

    now = datetime.now()
    taken = tmp_path / "multirun" / now.strftime("%Y-%m-%d") / now.strftime("%H-%M-%S")
    taken.mkdir(parents=True)  # as if a sweep had started this second already
    args = [o for o in tiny_overrides() if not o.startswith("trainer.max_steps")] + ["trainer.max_steps=3"]
    env = {k: v for k, v in os.environ.items() if k != "ZOO_RUN_TIME"}
    procs = [Forked("train", "-m", *args, f"seed={a}", cwd=tmp_path, env=env) for a in (1, 3)]  # tests/forked.py
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    summaries = sorted((tmp_path / "multirun").glob("*/*/*/summary.json"))
    assert len(summaries) == 2 and not any(taken.iterdir())
    sweeps = {s.parent.parent for s in summaries}
    assert len(sweeps) == 2
    from omegaconf import OmegaConf

    seeds = sorted(OmegaConf.load(s.parent / ".hydra" / "config.yaml").seed for s in summaries)
    assert seeds == [1, 3]
