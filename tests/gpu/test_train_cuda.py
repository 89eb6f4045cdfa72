"""zoo-train on a CUDA GPU end to end: trainer=gpu, ddp and fsdp, kill-and-resume bit-exactness
for every precision zoo offers (dropout on, across an epoch end), and checkpoints that move
between GPU and CPU. Real subprocesses, real files; skipped without CUDA."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.training.distributed.conftest import model_state, sigkill_when
from zoo.training.checkpoint.files import read_checkpoint

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

# a model big enough for the GPU kernels a real run uses (head size 64: flash attention),
# a corpus of ~12 steps per epoch, so 40 steps cross three epoch ends
GPU_RUN = [
    "model.d_model=128",
    "model.n_heads=2",
    "model.n_layers=2",
    "data.seq_len=64",
    "model.max_seq_len=64",
    "data.max_examples=200",
    "data.global_batch_size=16",
    "model.dropout=0.1",
    "trainer.max_steps=40",
    "scheduler.total_steps=40",
    "trainer.val_check_interval=10",
    "callbacks.checkpoint_every_n_steps=5",
]
# messages a clean run must not print
NOISE = ("sync_dist=True", "AccumulateGrad node's stream", "weights_only` was not set")


def _summary(run) -> dict:
    return json.loads((run / "summary.json").read_text())


def _clean(stderr: str) -> None:
    for text in NOISE:
        assert text not in stderr, f"the run printed {text!r}"


@pytest.mark.parametrize(
    "trainer, extra",
    [("gpu", []), ("ddp", []), ("fsdp", []), ("fsdp", ["task.compile=true"])],
    ids=["gpu", "ddp", "fsdp", "fsdp-compile"],
)
def test_zoo_train_on_the_gpu_end_to_end(tmp_path, trainer, extra):
    run = tmp_path / trainer
    result = zoo_train(*tiny_overrides(run), *GPU_RUN, f"trainer={trainer}", "trainer.devices=1", *extra)
    assert result.returncode == 0, result.stderr[-3000:]
    _clean(result.stderr + result.stdout)
    summary = _summary(run)
    assert summary["global_step"] == 40 and summary["world_size"] == 1
    assert 0 < summary["metrics"]["val/loss"] < 6
    if trainer == "fsdp":
        assert (run / "checkpoints" / "last.ckpt").is_dir() and summary["full_checkpoint"]


def test_fsdp_replay_trains_with_clipping_and_resumes_with_more_steps(tmp_path):
    """The reported failures: trainer=fsdp with zoo's default clipping (norm 1.0) failed at its
    first step; continuing it with a larger max_steps failed with KeyError 'state_dict'."""
    run = tmp_path / "fsdp"
    base = [
        *tiny_overrides(run),
        "trainer=fsdp",
        "trainer.devices=1",
        "model=llama",
        "model.d_model=128",
        "model.n_heads=2",
        "model.n_kv_heads=1",
        "model.n_layers=2",
        "model.vocab_size=300",
        "scheduler.warmup_steps=0",
        "trainer.val_check_interval=20",
    ]
    first = zoo_train(*base, "trainer.max_steps=60")
    assert first.returncode == 0, first.stderr[-3000:]
    second = zoo_train(*base, "trainer.max_steps=80")
    assert second.returncode == 0, second.stderr[-3000:]
    summary = _summary(run)
    assert summary["resumed_at_step"] == 60 and summary["global_step"] == 80


@pytest.mark.parametrize(
    "trainer, precision",
    [
        ("gpu", "32-true"),
        ("gpu", "bf16-mixed"),
        ("gpu", "16-mixed"),
        ("gpu", "bf16-true"),
        ("fsdp", "bf16-mixed"),
    ],
)
def test_sigkill_then_rerun_is_bit_identical_on_the_gpu(tmp_path, trainer, precision):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    args = [*GPU_RUN, f"trainer={trainer}", "trainer.devices=1", f"trainer.precision={precision}"]
    result = zoo_train(*tiny_overrides(straight), *args)
    assert result.returncode == 0, result.stderr[-3000:]

    cmd = [sys.executable, "-m", "zoo.cli.train", *tiny_overrides(killed), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    last = killed / "checkpoints" / "last.ckpt"
    marker = last / "meta.pt" if trainer == "fsdp" else last
    sigkill_when(proc, marker.is_file, 300, "the first last.ckpt")
    at_kill = read_checkpoint(last, weights=False)["global_step"]
    assert 0 < at_kill < 40
    result = zoo_train(*tiny_overrides(killed), *args)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = _summary(killed)
    assert summary["resumed_at_step"] == at_kill and summary["global_step"] == 40
    a, b = model_state(straight / "checkpoints" / "last.ckpt"), model_state(last)
    differ = [k for k in a if not torch.equal(a[k], b[k])]
    assert not differ, f"resumed from step {at_kill}, weights differ: {differ[:5]}"
    assert summary["metrics"]["val/loss"] == _summary(straight)["metrics"]["val/loss"]


def test_checkpoints_move_between_gpu_and_cpu(tmp_path):
    """A checkpoint trained on the GPU evaluates and generates on a CPU-only process (no CUDA
    visible), with the metrics it has on the GPU; one trained on the CPU evaluates on the GPU."""
    gpu_run, cpu_run = tmp_path / "gpu", tmp_path / "cpu"
    assert zoo_train(*tiny_overrides(gpu_run), *GPU_RUN, "trainer=gpu", "trainer.precision=32-true").returncode == 0
    assert zoo_train(*tiny_overrides(cpu_run), *GPU_RUN).returncode == 0
    no_cuda = dict(os.environ, CUDA_VISIBLE_DEVICES="")

    def run(tool, *args, env=None):
        r = subprocess.run(
            [sys.executable, "-m", f"zoo.cli.{tool}", *args], capture_output=True, text=True, env=env, timeout=300
        )
        assert r.returncode == 0, r.stderr[-3000:]
        return r

    def metrics(path, accelerator, env=None):
        out = path.parent / f"eval-{accelerator}.json"
        run("eval", f"ckpt={path}", f"accelerator={accelerator}", "limit_batches=4", f"out={out}", env=env)
        return json.loads(out.read_text())["metrics"]

    gpu_ckpt, cpu_ckpt = gpu_run / "checkpoints" / "last.ckpt", cpu_run / "checkpoints" / "last.ckpt"
    on_cpu, on_gpu = metrics(gpu_ckpt, "cpu", env=no_cuda), metrics(gpu_ckpt, "gpu")
    assert on_cpu["loss"] == pytest.approx(on_gpu["loss"], rel=1e-4)
    cpu_on_gpu, cpu_on_cpu = metrics(cpu_ckpt, "gpu"), metrics(cpu_ckpt, "cpu", env=no_cuda)
    assert cpu_on_gpu["loss"] == pytest.approx(cpu_on_cpu["loss"], rel=1e-4)
    text = run("generate", f"ckpt={gpu_ckpt}", "prompt=And God said", "max_new_tokens=8", env=no_cuda).stdout
    assert "And God said" in text
