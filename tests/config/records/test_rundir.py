"""`RunDir` names every file of a run directory and `RunSummary` writes and reads summary.json:
a summary survives a round trip, an older one with fewer keys still reads, train()'s own
summary reads back with the same values, and a finished run writes no file RunDir does not
name. The file names are spelt out here on purpose: they are what a user sees."""

from __future__ import annotations

import json

import pytest

import zoo
from tests.cli.conftest import tiny_overrides
from zoo import train
from zoo.config.records.rundir import DamagedRecord, RunDir, RunFailure, RunSummary


def _summary(**changes) -> RunSummary:
    values = dict(
        run_dir="runs/x",
        status="finished",
        task="causal_lm",
        family="decoder_only",
        position="rope",
        global_step=6,
        tokens_seen=768,
        train_seconds=1.2,
        tokens_per_s=640.0,
        wall_seconds=1.6,
        metrics={"val/loss": 5.4, "train/loss": 5.3},
        prepared_data=None,
        model={"total_params": 100, "seq_len": 32},
        baseline={"unigram_val_loss": 3.0},
        sample="And God said a",
        init_from=None,
        resumed_from=None,
        resumed_at_step=None,
        nonfinite_skipped=0,
        world_size=1,
        best_checkpoint="runs/x/checkpoints/best-6.ckpt",
        last_checkpoint="runs/x/checkpoints/last.ckpt",
        full_checkpoint=None,
    )
    values.update(changes)
    return RunSummary(**values)


def test_paths_of_a_run_directory(tmp_path):
    run = RunDir(tmp_path)
    assert run.config == tmp_path / "config.yaml"
    assert run.summary == tmp_path / "summary.json"
    assert run.failed == tmp_path / "failed.json"
    assert run.checkpoints == tmp_path / "checkpoints"
    assert run.last == tmp_path / "checkpoints" / "last.ckpt"
    assert run.full == tmp_path / "checkpoints" / "full.ckpt"
    assert run.tokenizer == tmp_path / "tokenizer"
    assert run.metrics == tmp_path / "metrics.csv"
    assert run.tensorboard == tmp_path / "tb"
    assert run.lengths == tmp_path / "lengths.json"
    assert run.log == tmp_path / "train.log"
    assert run.overrides == tmp_path / ".hydra" / "overrides.yaml"
    assert run.hydra_config == tmp_path / ".hydra" / "config.yaml"
    assert run.lock == tmp_path / ".zoo-lock"
    assert RunDir(str(tmp_path)) == run


def test_names_knows_the_run_files_and_nothing_else():
    run = RunDir("r")
    for name in (
        "summary.json",
        "checkpoints/best-12.ckpt",
        "train.rank3.log",
        ".hydra/hydra.yaml",
        "tokenizer/tokenizer.json",
        "tb/events.out.tfevents.1",
        "hparams.yaml",
        ".zoo-lock",
    ):
        assert run.names(name), name
    for name in ("notes.txt", "checkpoints/other.ckpt", "checkpoints/last.ckpt/shard.distcp", "sub/summary.json", ""):
        assert not run.names(name), name


def test_summary_round_trip_keeps_values_order_and_unknown_keys(tmp_path):
    summary = _summary(replicas_identical=True, replica_max_fingerprint_diff=0.0, extra={"from_a_newer_zoo": [1, 2]})
    path = summary.write(tmp_path)
    assert path == tmp_path / "summary.json"
    written = json.loads(path.read_text())
    assert list(written)[:3] == ["run_dir", "status", "task"]
    assert list(written)[-1] == "from_a_newer_zoo"
    assert list(written).index("replicas_identical") == list(written).index("world_size") + 1
    back = RunSummary.read(tmp_path)
    assert back == summary
    assert back.as_dict() == written


def test_optional_keys_are_left_out_when_absent(tmp_path):
    written = _summary(baseline=None, sample=None).as_dict()
    assert not {"baseline", "sample", "replicas_identical", "replica_max_fingerprint_diff"} & set(written)
    assert written["init_from"] is None and "full_checkpoint" in written  # always written, null or not


def test_an_older_summary_with_fewer_keys_reads(tmp_path):
    (tmp_path / "summary.json").write_text(
        json.dumps({"status": "finished", "global_step": 20, "metrics": {"val/loss": 2.5}, "old_key": "kept"})
    )
    summary = RunSummary.read(tmp_path)
    assert summary.status == "finished" and summary.global_step == 20
    assert summary.metrics == {"val/loss": 2.5}
    assert summary.tokens_seen is None and summary.model == {} and summary.sample is None
    assert summary.extra == {"old_key": "kept"}
    summary.write(tmp_path)  # written back: the unknown key stays, the missing ones read as null
    again = json.loads((tmp_path / "summary.json").read_text())
    assert again["old_key"] == "kept" and again["tokens_seen"] is None
    (tmp_path / "summary.json").write_text("{}")
    assert RunSummary.read(tmp_path).metrics == {}


@pytest.mark.parametrize(
    "text, reason",
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "a JSON list, not an object"),
        ('{"metrics": [1]}', "its metrics are not a mapping"),
        ('{"metrics": {"val/loss": "low"}}', "metric 'val/loss' is 'low', not a number"),
    ],
)
def test_a_damaged_summary_is_named(tmp_path, text, reason):
    (tmp_path / "summary.json").write_text(text)
    with pytest.raises(DamagedRecord, match="summary.json is damaged") as caught:
        RunSummary.read(tmp_path)
    assert reason in str(caught.value)


def test_the_summary_train_writes_reads_back_the_same(tmp_path):
    cfg = zoo.compose([o for o in tiny_overrides() if not o.startswith("hydra.")] + ["trainer.max_steps=3"])
    result = train(cfg, tmp_path)
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written == result.summary
    summary = RunSummary.read(tmp_path)
    assert summary.extra == {}  # every key train writes is a field
    assert summary.as_dict() == written and list(summary.as_dict()) == list(written)
    assert summary.status == "finished" and summary.global_step == 3 and summary.task == "causal_lm"
    assert summary.last_checkpoint == str(tmp_path / "checkpoints" / "last.ckpt")
    assert summary.metrics["val/loss"] == written["metrics"]["val/loss"]
    assert summary.baseline == written["baseline"] and summary.sample.startswith("And God said")


@pytest.mark.slow
def test_every_file_of_a_finished_run_is_named_by_rundir(tmp_path, cli_here):
    """zoo-train's main() in this process writes the run directory a zoo-train process writes."""
    run = tmp_path / "run"
    result = cli_here("train", *tiny_overrides(run), "logger=tensorboard")
    assert result.returncode == 0, result.stderr[-3000:]
    files = sorted(p.relative_to(run) for p in run.rglob("*") if p.is_file())
    assert [str(p) for p in files if not RunDir(run).names(p)] == []
    paths = RunDir(run)
    for path in (
        paths.config,
        paths.summary,
        paths.last,
        paths.metrics,
        paths.log,
        paths.overrides,
        paths.hydra_config,
    ):
        assert path.is_file(), path
    assert paths.tokenizer.is_dir() and paths.tensorboard.is_dir()
    assert list(paths.checkpoints.glob(RunDir.BEST_FILES))
    assert not paths.failed.exists() and not paths.lock.exists()  # released when the command ends
    assert RunSummary.read(run).best_checkpoint == str(next(paths.checkpoints.glob(RunDir.BEST_FILES)))
    # the log says which options the command named and which came from a preset's defaults
    composed = next(line for line in paths.log.read_text().splitlines() if "composed from:" in line)
    assert "task=causal_lm (default)" in composed and "data=kjv (default)" in composed, composed
    assert "tokenizer=byte " in composed and "tokenizer=byte (default)" not in composed  # named: not marked
    assert "model=gpt (default)" in composed


def test_a_failure_record_round_trips_with_its_optional_keys_left_out_when_absent(tmp_path):
    stop = RunFailure(
        error="SIGTERM at step 4", signal=15, step=4, resume="zoo-train hydra.run.dir=x", extra={"host": "n1"}
    )
    stop.write(tmp_path)
    assert json.loads(RunDir(tmp_path).failed.read_text()) == {
        "status": "failed",
        "error": "SIGTERM at step 4",
        "signal": 15,
        "step": 4,
        "resume": "zoo-train hydra.run.dir=x",
        "host": "n1",
    }
    assert RunFailure.read(tmp_path) == stop
    RunFailure(error="rank 1 died").write(tmp_path)
    assert json.loads(RunDir(tmp_path).failed.read_text()) == {"status": "failed", "error": "rank 1 died"}
    assert RunFailure.read(tmp_path).signal is None


@pytest.mark.parametrize(
    "text, reason",
    [
        ("{", "not JSON"),
        ("[]", "not an object"),
        ('{"error": 3}', "error is 3, not text"),
        ('{"error": "x", "step": "4"}', "step is '4', not an integer"),
        ('{"error": "x", "signal": true}', "signal is True, not an integer"),
    ],
)
def test_a_damaged_failure_record_is_named(tmp_path, text, reason):
    RunDir(tmp_path).failed.write_text(text)
    with pytest.raises(DamagedRecord, match=reason):
        RunFailure.read(tmp_path)
