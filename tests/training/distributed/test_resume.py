"""Exact, kill-safe resume: a run killed with SIGKILL mid-epoch and started again ends with the
weights of a run that was never interrupted; a kill while a checkpoint is written leaves the
previous one loadable."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from tests.cli.conftest import tiny_overrides
from tests.training.distributed.conftest import model_state, sigkill_when
from zoo.training.checkpoint.files import read_checkpoint
from zoo.training.checkpoint.saving import atomic_save, remove_stale_temporaries

# dropout on: the resumed run must also continue the random streams exactly
RUN = [
    "trainer.max_steps=240",
    "trainer.val_check_interval=40",
    "callbacks.checkpoint_every_n_steps=20",
    "model.dropout=0.1",
    "data.global_batch_size=4",
]


@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_gives_the_uninterrupted_weights(tmp_path, cli_here):
    """The killed run is a process of its own; the straight run and the resume are zoo-train's
    main() in this process (what they compute does not depend on the process they run in)."""
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    result = cli_here("train", *tiny_overrides(straight), *RUN)
    assert result.returncode == 0, result.stderr[-3000:]

    cmd = [sys.executable, "-m", "zoo.cli.train", *tiny_overrides(killed), *RUN]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    last = killed / "checkpoints" / "last.ckpt"
    sigkill_when(proc, last.is_file, 180, "the first last.ckpt")
    assert not (killed / "summary.json").exists()  # it did not get to the end
    at_kill = read_checkpoint(last)
    assert 0 < at_kill["global_step"] < 240
    loader_state = at_kill["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]
    assert loader_state["epoch"] == 0 and loader_state["batches"] == at_kill["global_step"]  # mid-epoch
    assert len(at_kill["callbacks"]["RngState"]["ranks"]) == 1

    result = cli_here("train", *tiny_overrides(killed), *RUN)  # same command: resumes from last.ckpt
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["resumed_from"] == str(last)
    assert summary["global_step"] == 240

    a = model_state(straight / "checkpoints" / "last.ckpt")
    b = model_state(last)
    assert all(torch.equal(a[k], b[k]) for k in a), "resumed weights differ from the uninterrupted run"
    expected = json.loads((straight / "summary.json").read_text())["metrics"]["val/loss"]
    assert summary["metrics"]["val/loss"] == expected


@pytest.mark.parametrize(
    "stop, full",
    [
        (["trainer.max_steps=7"], ["trainer.max_steps=30"]),  # mid-epoch 0, the checkpoint of the last step
        (
            ["trainer.max_steps=11", "data.num_workers=2"],  # mid-epoch 1, loader workers
            ["trainer.max_steps=30", "data.num_workers=2"],
        ),
        (["trainer.max_steps=8"], ["trainer.max_steps=30"]),  # the last step is an epoch end
        (
            ["trainer.max_steps=-1", "trainer.max_epochs=1"],  # the checkpoint of an epoch end
            ["trainer.max_steps=-1", "trainer.max_epochs=3"],
        ),
    ],
    ids=["mid-epoch-0", "mid-epoch-1-workers", "epoch-end-steps", "epoch-end-epochs"],
)
@pytest.mark.slow
def test_continuing_a_finished_run_across_epochs_is_exact(tmp_path, stop, full, cli_here):
    """A small corpus (8 steps per epoch): train to a stop, continue it with a longer budget
    (`ckpt_path=last`) across epochs, each reshuffled, and match the run that went straight.
    Each run is zoo-train's main() in this process: nothing here is about a process of its own
    (the kill test above is), and each would spend most of its time starting Python."""
    small = [
        "data.max_examples=10",
        "model.dropout=0.1",
        "data.global_batch_size=4",
        "trainer.val_check_interval=null",
        "trainer.check_val_every_n_epoch=1",
        "callbacks.checkpoint_every_n_steps=5",
        "scheduler.total_steps=30",
    ]
    straight, split = tmp_path / "straight", tmp_path / "split"
    result = cli_here("train", *tiny_overrides(straight), *small, *full)
    assert result.returncode == 0, result.stderr[-3000:]
    first = cli_here("train", *tiny_overrides(split), *small, *stop)
    assert first.returncode == 0, first.stderr[-3000:]
    assert read_checkpoint(split / "checkpoints" / "last.ckpt")["global_step"] in (7, 8, 11)
    second = cli_here("train", *tiny_overrides(split), *small, *full, "ckpt_path=last")
    assert second.returncode == 0, second.stderr[-3000:]
    end = read_checkpoint(split / "checkpoints" / "last.ckpt")
    assert end["loops"]["fit_loop"]["epoch_progress"]["current"]["completed"] >= 2  # crossed epochs
    a = model_state(straight / "checkpoints" / "last.ckpt")
    b = model_state(split / "checkpoints" / "last.ckpt")
    assert all(torch.equal(a[k], b[k]) for k in a)


WRITER = textwrap.dedent("""
    import sys, torch
    from zoo.training.checkpoint.saving import atomic_save
    # ~400 MB: long enough to be killed in the middle of writing it
    atomic_save({"state_dict": {"w": torch.ones(100_000_000)}, "hyper_parameters": {}}, sys.argv[1])
""")


@pytest.mark.slow
def test_a_kill_while_saving_leaves_the_previous_checkpoint_loadable(tmp_path):
    path = tmp_path / "last.ckpt"
    atomic_save({"state_dict": {"w": torch.arange(5.0)}, "hyper_parameters": {"step": 1}}, path)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
    tmp = tmp_path / f".last.ckpt.tmp-{proc.pid}"
    sigkill_when(proc, lambda: tmp.is_file() and tmp.stat().st_size > 1_000_000, 120, "the write to start")
    assert tmp.is_file()  # the half-written file is the temporary one
    data = read_checkpoint(path)
    assert torch.equal(data["state_dict"]["w"], torch.arange(5.0))
    assert remove_stale_temporaries(tmp_path) == [tmp] and not tmp.exists()
    assert path.is_file()
