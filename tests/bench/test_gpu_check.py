"""benchmarks/gpu_check.sh, the one command for a lent GPU, run in its tiny mode on the CPU: every
part runs, each exit status is recorded, and benchmarks/gpu_summary.py turns the output into one
dated JSON record and a Markdown summary (the GPU's own figures come only from a GPU)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_gpu_check_runs_every_part_and_writes_one_dated_record(tmp_path):
    out, results = tmp_path / "out", tmp_path / "results"
    env = dict(os.environ, TINY="1", OUT=str(out), RESULTS=str(results))
    result = subprocess.run(
        ["bash", "benchmarks/gpu_check.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    status = dict(line.split() for line in (out / "status.txt").read_text().splitlines())
    assert status == {"train-reference": "0", "generate-reference": "0", "suite": "0"}, status
    records = list(results.glob("*.json"))
    assert len(records) == 1 and records[0].name.endswith("-no-gpu-cpu.json"), records
    record = json.loads(records[0].read_text())
    assert set(record["bench"]) == {"train-reference", "generate-reference"}
    train = {r["system"]: r for r in record["bench"]["train-reference"]["rows"]}
    assert set(train) == {"zoo", "hf"} and all(r["train_tokens_per_s"] > 0 for r in train.values())
    generate = {r["system"]: r for r in record["bench"]["generate-reference"]["rows"]}
    assert all(r["generate_tokens_per_s_batch1"] > 0 for r in generate.values())
    suite = record["suite"]
    assert suite["tests"] > 0 and suite["skipped"] == suite["tests"] and not suite["failed"]  # no CUDA here
    assert record["targets"] == []  # a CPU is not measured against the GPU's targets
    summary = (out / "summary.md").read_text()
    assert "## GPU suite" in summary and f"{suite['tests']} tests" in summary and "| zoo | eager |" in summary
    assert summary in result.stdout


def test_the_summary_checks_the_targets_against_what_was_measured(tmp_path):
    """A GPU's output (figures of the 2026-11-26 H100 check): each target met or missed from the
    measured figures; a part that ran out of time named; a target nobody measured said so."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from gpu_summary import summarize
    finally:
        sys.path.pop(0)
    out = tmp_path / "out"
    out.mkdir()
    (out / "gpu.txt").write_text(
        "NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04\ntorch 2.11.0+cu130 | lightning 2.6.6\n2026-11-26\n"
    )
    rows = [
        {"system": "zoo", "name": "zoo", "variant": "bf16-compile", "train_tokens_per_s": 447426.0, "mfu": 0.71},
        {"system": "hf", "name": "hf", "variant": "bf16-compile", "train_tokens_per_s": 368233.0, "mfu": 0.58},
    ]
    workload = {"batch": 16, "seq_len": 1024, "rounds": 3, "prompt": 32, "new_tokens": 128, "gen_batch": 8}
    (out / "train-gpt2-small.json").write_text(json.dumps({"rows": rows, "workload": workload, "ratios": {}}))
    (out / "status.txt").write_text("train-gpt2-small 0\ngenerate-gpt2-small 124\n")
    decoding = [  # batch-1 decoding of the ~1B model: zoo's best share of the bandwidth limit is checked
        {"system": "zoo", "name": "zoo", "variant": "bf16", "generate_bandwidth_share": 0.02},
        {"system": "zoo", "name": "zoo", "variant": "bf16-compile", "generate_bandwidth_share": 0.31},
        {"system": "gpt-fast", "name": "gpt-fast-style", "variant": "bf16-compile", "generate_bandwidth_share": 0.7},
    ]
    (out / "generate-llama-1b.json").write_text(json.dumps({"rows": decoding, "workload": workload, "ratios": {}}))
    sliding = {"seq_len": 16384, "relative_to_full": {"full": 1.0, "sliding_sdpa": 0.41, "sliding_flex": 1.7}}
    (out / "sliding-train.json").write_text(json.dumps(sliding))  # benchmarks/sliding_train.py's shape
    record, text = summarize(out, tmp_path / "results")
    targets = {c["target"]: c for c in record["targets"]}
    assert targets["sliding_flex training at 16384 tokens against full attention"]["met"]
    assert not targets["sliding_sdpa training at 16384 tokens against full attention"]["met"]
    assert targets["compiled training vs the best compiled peer"]["got"] == pytest.approx(447426 / 368233)
    assert not targets["compiled training vs the best compiled peer"]["met"]
    assert targets["compiled training MFU"]["met"]
    share = targets["greedy decoding of llama-1b at batch 1, share of the bandwidth limit"]
    assert (share["got"], share["met"]) == (0.31, False)
    assert "greedy decoding tokens/s at batch 1: not measured" in text
    assert "generate-gpt2-small: ran past its time limit" in text
    assert Path(record["path"]).name == "2026-11-26-nvidia-h100-80gb-hbm3.json"
