"""A sharded checkpoint (trainer=fsdp) is checked whole before use: rank 0 records the size and
SHA-256 of every file of the directory (`zoo-digests.json`) once all shards are written, and
every reader compares them first. A shard with one byte changed used to be read without a word;
now zoo-eval refuses it and the run is not resumed from it, each on one line. So is a directory
whose record was deleted (it switched the check off): meta.pt says the record was written."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import tiny_overrides, zoo_train
from zoo.training.checkpoint.integrity import DIGESTS

SHARDED = ["trainer=fsdp_cpu", "data.global_batch_size=8"]


@pytest.mark.slow
def test_a_changed_shard_is_refused_by_zoo_eval_and_by_the_resume(tmp_path, cli_here):
    run = tmp_path / "run"
    overrides = [o for o in tiny_overrides(run) if not o.startswith(("trainer.max_steps=", "data.global_batch_size="))]
    overrides += SHARDED
    result = zoo_train(*overrides, "trainer.max_steps=3")
    assert result.returncode == 0, result.stderr[-3000:]
    last = run / "checkpoints" / "last.ckpt"
    record = json.loads((last / DIGESTS).read_text())
    assert {"__0_0.distcp", "__1_0.distcp", ".metadata", "meta.pt"} <= set(record)
    assert cli_here("eval", f"ckpt={last}").returncode == 0  # intact: it reads

    shard = last / "__1_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x40
    shard.write_bytes(bytes(data))
    kept = {p.name: p.read_bytes() for p in (run / "metrics.csv", run / "summary.json")}

    for result in (cli_here("eval", f"ckpt={last}"), cli_here("train", *overrides, "trainer.max_steps=6")):
        assert result.returncode == 2, result.stderr[-3000:]
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in result.stderr, lines
        assert f"checkpoint {last} is damaged: __1_0.distcp does not match the SHA-256" in lines[0]
    assert {p.name: p.read_bytes() for p in (run / "metrics.csv", run / "summary.json")} == kept

    (last / DIGESTS).unlink()  # the record of the digests, in meta.pt, says it was written
    for result in (cli_here("eval", f"ckpt={last}"), cli_here("train", *overrides, "trainer.max_steps=6")):
        assert result.returncode == 2, result.stderr[-3000:]
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in result.stderr, lines
        assert f"checkpoint {last} is damaged: its {DIGESTS}, written with it, is missing" in lines[0]
    assert {p.name: p.read_bytes() for p in (run / "metrics.csv", run / "summary.json")} == kept
