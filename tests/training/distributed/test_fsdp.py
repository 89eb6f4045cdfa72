"""Fully sharded data parallelism (trainer=fsdp_cpu: FSDP2 over two gloo CPU processes), end to
end through real processes and real files: it trains to the weights DDP trains to, its sharded
checkpoints resume exactly (after a SIGKILL, after a kill in the middle of the swap, on another
number of ranks), the inference tools read them on one process, and the shard index is read as
data."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.cli.conftest import tiny_overrides, zoo_train
from tests.forked import fork_tool
from tests.training.distributed.conftest import kill, max_abs_diff, model_state, sigkill_when
from zoo.training.checkpoint.files import CheckpointError, read_checkpoint

# 9 optimizer steps per epoch (max_examples=20 gives 76 windows of 32 tokens; 8 per step over
# the ranks, the last partial step dropped): 24 steps cross two epoch ends, each reshuffled. Dropout on (the random streams must continue exactly on resume) and a clip
# threshold far below the gradient norm (clipping acts on every step, its norm is the norm of
# the whole sharded gradient).
RUN = [
    "data.max_examples=20",
    "data.global_batch_size=8",
    "model.dropout=0.1",
    "scheduler.total_steps=24",
    "trainer.max_steps=24",
    "trainer.val_check_interval=4",
    "callbacks.checkpoint_every_n_steps=4",
    "trainer.gradient_clip_val=0.05",
]
FSDP = "trainer=fsdp_cpu"
CLIP = 0.05
STOP = 7  # the step the stopped run ends at: mid-epoch 0


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def _ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr[-3000:]


def _identical(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    """One fsdp_cpu run of RUN, 24 steps without interruption (shared by the tests below)."""
    run = tmp_path_factory.mktemp("fsdp") / "straight"
    _ok(zoo_train(*tiny_overrides(run), *RUN, FSDP))
    return run


@pytest.fixture(scope="module")
def stopped(tmp_path_factory) -> Path:
    """An fsdp_cpu run of RUN stopped at max_steps=STOP (mid-epoch 0): a 2-rank sharded
    checkpoint to continue from. Tests continue copies of it."""
    run = tmp_path_factory.mktemp("fsdp") / "stopped"
    _ok(zoo_train(*tiny_overrides(run), *RUN, FSDP, f"trainer.max_steps={STOP}"))
    assert read_checkpoint(run / "checkpoints" / "last.ckpt", weights=False)["global_step"] == STOP
    return run


# -- 1. the same weights as DDP ----------------------------------------------------------------


@pytest.mark.slow
def test_fsdp_ends_where_ddp_ends_and_writes_sharded_and_full_checkpoints(straight, tmp_path):
    ddp = tmp_path / "ddp"
    _ok(zoo_train(*tiny_overrides(ddp), *RUN, "trainer=ddp_cpu"))

    s_fsdp, s_ddp = _summary(straight), _summary(ddp)
    assert s_fsdp["world_size"] == s_ddp["world_size"] == 2
    assert s_fsdp["global_step"] == s_ddp["global_step"] == 24
    assert s_fsdp["tokens_seen"] == s_ddp["tokens_seen"] == 24 * 8 * 32
    last = straight / "checkpoints" / "last.ckpt"
    full = straight / "checkpoints" / "full.ckpt"
    fsdp_weights = model_state(last)
    diff = max_abs_diff(fsdp_weights, model_state(ddp / "checkpoints" / "last.ckpt"))
    assert diff <= 1e-5, diff

    # the sharded checkpoint: a directory, one shard per rank, the index, the plain-data part
    assert last.is_dir()
    assert sorted(p.name for p in last.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    assert (last / ".metadata").is_file() and (last / "meta.pt").is_file()
    assert not list((straight / "checkpoints").glob(".*-sharded"))  # no leftovers of the swap
    # the whole model in one file, exactly the gathered shards, without the optimizer
    assert full.is_file() and s_fsdp["full_checkpoint"] == str(full)
    full_data = read_checkpoint(full)
    assert "optimizer_states" not in full_data and full_data["global_step"] == 24
    assert _identical(model_state(full), fsdp_weights)

    # clipping acted: the gradient norm of these weights on a batch is far above the threshold
    from zoo.training.checkpoint.files import load_checkpoint

    task = load_checkpoint(full).train()
    ids = torch.randint(0, 256, (4, 32), generator=torch.Generator().manual_seed(0))
    logits = task.model(ids[:, :-1]).logits
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten()).backward()
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in task.parameters() if p.grad is not None]))
    assert norm > 10 * CLIP, norm

    # the same 3 validation windows (DDP: 2 on rank 0, 1 on rank 1; FSDP: all 3 on each rank),
    # so the same token-weighted mean loss and bits per byte
    for name in ("val/loss", "val/bpb"):
        assert abs(s_fsdp["metrics"][name] - s_ddp["metrics"][name]) <= 1e-4, (
            name,
            s_fsdp["metrics"][name],
            s_ddp["metrics"][name],
        )


# -- 2. exact resume ----------------------------------------------------------------------------


def _descendants(pid: int) -> list[int]:
    from tests.training.distributed.conftest import children

    out = []
    for child in children(pid):
        out += [child, *_descendants(child)]
    return out


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.slow
def test_sigkill_then_the_same_command_gives_the_uninterrupted_weights(straight, tmp_path):
    """SIGKILL every rank as soon as the first sharded last.ckpt is complete; the same command
    in the same run directory resumes from it and ends bit for bit where the straight run did."""
    from tests.training.distributed.conftest import wait_for

    run = tmp_path / "killed"
    ckpts = run / "checkpoints"
    last, old = ckpts / "last.ckpt", ckpts / ".last.ckpt.old-sharded"
    cmd = [sys.executable, "-m", "zoo.cli.train", *tiny_overrides(run), *RUN, FSDP]
    with open(tmp_path / "killed.stderr", "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True)
        ranks: list[int] = []

        def first_checkpoint() -> bool:  # the directory is briefly absent while a later one is swapped in
            if (last / "meta.pt").is_file():
                ranks[:] = _descendants(proc.pid)  # rank 1 (and anything it started), before they are orphaned
                return True
            return False

        try:
            sigkill_when(proc, first_checkpoint, 180, "the first sharded last.ckpt")
        finally:
            for pid in ranks:
                kill(pid)
            for pid in _descendants(proc.pid):
                kill(pid)
    assert ranks, "no rank-1 process found"
    wait_for(lambda: all(_gone(pid) for pid in ranks), 30, "the other ranks to end")
    assert not (run / "summary.json").exists()  # it did not get to the end
    on_disk = last if last.exists() else old  # a kill between the two renames of a swap leaves `old`
    at_kill = read_checkpoint(on_disk, weights=False)
    assert 0 < at_kill["global_step"] < 24
    assert len(at_kill["callbacks"]["RngState"]["ranks"]) == 2

    result = zoo_train(*tiny_overrides(run), *RUN, FSDP)  # the same command: resumes from last.ckpt
    _ok(result)
    summary = _summary(run)
    assert summary["resumed_from"] == str(last)
    assert summary["resumed_at_step"] == at_kill["global_step"]
    assert summary["global_step"] == 24 and summary["world_size"] == 2
    assert _identical(model_state(last), model_state(straight / "checkpoints" / "last.ckpt")), (
        "resumed weights differ from the uninterrupted run"
    )
    assert summary["metrics"]["val/loss"] == _summary(straight)["metrics"]["val/loss"]
    assert not list(ckpts.glob(".*-sharded"))


@pytest.mark.slow
def test_a_run_stopped_at_max_steps_continues_across_an_epoch_end_exactly(straight, stopped, tmp_path):
    run = _copy_run(stopped, tmp_path / "split")
    _ok(zoo_train(*tiny_overrides(run), *RUN, FSDP, "ckpt_path=last"))  # max_steps 24 > STOP
    last = run / "checkpoints" / "last.ckpt"
    end = read_checkpoint(last, weights=False)
    assert end["global_step"] == 24
    assert end["loops"]["fit_loop"]["epoch_progress"]["current"]["completed"] >= 2  # crossed epochs
    assert _summary(run)["resumed_at_step"] == STOP
    assert _identical(model_state(last), model_state(straight / "checkpoints" / "last.ckpt"))
    assert _summary(run)["metrics"]["val/loss"] == _summary(straight)["metrics"]["val/loss"]


# -- 3. another number of ranks ---------------------------------------------------------------


@pytest.mark.slow
def test_a_two_rank_sharded_checkpoint_continues_on_one_rank(straight, stopped, tmp_path):
    """The distributed checkpoint reshards on load: 2 shards into 1 process. Not bit for bit
    the 2-rank run: each rank draws its dropout masks from its own random stream, so one rank
    taking all 8 examples of a step draws other masks than two ranks taking 4 each, and the
    gradient is summed in another order (one local sum instead of an all-reduce of two). The
    weights stay close: 17 steps of a small learning rate, clipped to norm 0.05."""
    run = _copy_run(stopped, tmp_path / "one")
    _ok(zoo_train(*tiny_overrides(run), *RUN, FSDP, "trainer.devices=1"))  # reruns in its directory
    summary = _summary(run)
    assert summary["global_step"] == 24 and summary["world_size"] == 1
    assert summary["resumed_at_step"] == STOP
    last = run / "checkpoints" / "last.ckpt"
    assert sorted(p.name for p in last.glob("*.distcp")) == ["__0_0.distcp"]  # now written by one rank
    diff = max_abs_diff(model_state(last), model_state(straight / "checkpoints" / "last.ckpt"))
    assert 0 < diff <= 1e-2, diff
    assert abs(summary["metrics"]["val/loss"] - _summary(straight)["metrics"]["val/loss"]) <= 1e-2


# -- 4. the inference tools read both checkpoints on one process ------------------------------


@pytest.mark.slow
def test_eval_and_generate_read_the_sharded_dir_and_full_ckpt_alike(straight, cli_here):
    """zoo-eval and zoo-generate as their main() in this process: one process, no launcher's rank
    variables (the refusal tests below run zoo-eval as a process of its own)."""
    ckpts = straight / "checkpoints"
    evals, texts = [], []
    for ckpt in (ckpts / "last.ckpt", ckpts / "full.ckpt"):
        result = cli_here("eval", f"ckpt={ckpt}", "limit_batches=2")
        _ok(result)
        report = json.loads(result.stdout)
        assert report["checkpoint"] == str(ckpt)
        evals.append({k: v for k, v in report.items() if k != "checkpoint"})
        result = cli_here("generate", f"ckpt={ckpt}", "prompt=And God said", "max_new_tokens=12")
        _ok(result)
        texts.append(result.stdout)
    assert evals[0] == evals[1]
    assert evals[0]["examples_evaluated"] > 0 and torch.isfinite(torch.tensor(evals[0]["metrics"]["loss"]))
    assert texts[0] == texts[1] and texts[0].startswith("And God said")


@pytest.mark.slow
def test_export_reads_the_sharded_dir_as_the_full_checkpoint(straight, tmp_path):
    """zoo-export of the sharded directory writes the weights zoo-export of full.ckpt writes."""
    from safetensors.torch import load_file

    ckpts, tensors = straight / "checkpoints", []
    for name in ("last.ckpt", "full.ckpt"):
        out = tmp_path / name
        _ok(fork_tool("export", f"ckpt={ckpts / name}", f"out={out}"))
        tensors.append(load_file(out / "model.safetensors"))
    assert tensors[0].keys() == tensors[1].keys() and _identical(tensors[0], tensors[1])


# -- 5. refusals --------------------------------------------------------------------------------


def _refused(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


@pytest.mark.parametrize(
    "extra, words",
    [
        ([FSDP, "trainer.precision=16-mixed"], ["16-mixed", "bf16-mixed"]),
    ],
    ids=["fp16-mixed"],
)
@pytest.mark.slow  # starts a Python process that imports zoo
def test_what_fsdp_cannot_run_is_refused_on_one_line(tmp_path, extra, words):
    run = tmp_path / "r"
    _refused(zoo_train(*tiny_overrides(run), *extra), *words)
    assert not (run / "train.rank1.log").exists() and not (run / "checkpoints").exists()  # no rank started


@pytest.mark.slow
def test_a_sharded_checkpoint_is_not_resumed_without_fsdp(straight, tmp_path):
    sharded = straight / "checkpoints" / "last.ckpt"
    run = tmp_path / "ddp"
    _refused(
        zoo_train(*tiny_overrides(run), *RUN, "trainer=ddp_cpu", f"ckpt_path={sharded}"),
        "sharded checkpoint",
        "trainer=fsdp",
    )
    assert not (run / "train.rank1.log").exists() and not (run / "checkpoints").exists()

    # rerunning an FSDP run's command in its directory with a single-process trainer
    run = _copy_run(straight, tmp_path / "again")
    before = {p: p.stat().st_mtime_ns for p in (run / "checkpoints").rglob("*")}
    rank1_log = (run / "train.rank1.log").read_text()
    _refused(
        zoo_train(*tiny_overrides(run), *RUN, "trainer=cpu", "trainer.max_steps=30"),
        "sharded checkpoint",
        "trainer=fsdp",
    )
    assert {p: p.stat().st_mtime_ns for p in (run / "checkpoints").rglob("*")} == before
    assert (run / "train.rank1.log").read_text() == rank1_log


# -- 6. the shard index is data -----------------------------------------------------------------


class _RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.slow
def test_a_shard_index_that_would_run_code_is_refused(straight, tmp_path):
    ckpt = shutil.copytree(straight / "checkpoints" / "last.ckpt", tmp_path / "evil.ckpt")
    marker = tmp_path / "pwned"
    (ckpt / ".metadata").write_bytes(pickle.dumps({"metadata": _RunsCode(marker)}))
    (ckpt / "zoo-digests.json").unlink()  # an attacker's directory carries no record of the real one

    with pytest.raises(CheckpointError, match="refused"):
        read_checkpoint(ckpt)
    assert not marker.exists()

    result = fork_tool("eval", f"ckpt={ckpt}")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "zoo-eval: error:" in result.stderr and "refused" in result.stderr
    assert not marker.exists()


@pytest.mark.slow
def test_a_truncated_shard_is_refused_on_one_line(straight, tmp_path):
    ckpt = shutil.copytree(straight / "checkpoints" / "last.ckpt", tmp_path / "cut.ckpt")
    shard = ckpt / "__1_0.distcp"
    shard.write_bytes(shard.read_bytes()[:100])  # a copy cut off

    for weights in (False, True):  # the directory is checked whole against its recorded digests first
        with pytest.raises(CheckpointError, match=r"is damaged: __1_0\.distcp has 100 bytes"):
            read_checkpoint(ckpt, weights=weights)
    (ckpt / "zoo-digests.json").unlink()  # without its digests (as a directory from elsewhere comes),
    for weights in (False, True):  # the index finds it, before any shard is read
        with pytest.raises(CheckpointError, match="'__1_0.distcp' ends before .* truncated"):
            read_checkpoint(ckpt, weights=weights)
    result = fork_tool("eval", f"ckpt={ckpt}")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


# -- 7. a kill in the middle of the swap --------------------------------------------------------


def _interrupt_swap(ckpts: Path) -> None:
    """The state a kill between `last.ckpt -> .last.ckpt.old-sharded` and `.tmp-sharded ->
    last.ckpt` leaves: no last.ckpt, the previous one aside, the next one half written."""
    os.replace(ckpts / "last.ckpt", ckpts / ".last.ckpt.old-sharded")
    tmp = ckpts / ".last.ckpt.tmp-sharded"
    tmp.mkdir()
    (tmp / "__0_0.distcp").write_bytes(b"\x00" * 100)  # one rank's shard, cut off


@pytest.mark.slow
def test_a_kill_during_the_swap_is_recovered(stopped, tmp_path):
    from zoo.training.distributed.fsdp import recover_sharded

    run = _copy_run(stopped, tmp_path / "swap")
    ckpts = run / "checkpoints"
    last, old, tmp = ckpts / "last.ckpt", ckpts / ".last.ckpt.old-sharded", ckpts / ".last.ckpt.tmp-sharded"
    expected = model_state(last)

    _interrupt_swap(ckpts)
    assert not last.exists()
    notes = recover_sharded(ckpts)
    assert len(notes) == 2, notes
    assert last.is_dir() and not old.exists() and not tmp.exists()
    assert read_checkpoint(last, weights=False)["global_step"] == STOP
    assert _identical(model_state(last), expected)

    # killed after the second rename, before the old one was removed: last.ckpt is the new one
    shutil.copytree(last, old)
    tmp.mkdir()
    recover_sharded(ckpts)
    assert last.is_dir() and not old.exists() and not tmp.exists()
    assert _identical(model_state(last), expected)

    # through the CLI: the same command in the run directory puts it back and resumes from it
    _interrupt_swap(ckpts)
    _ok(zoo_train(*tiny_overrides(run), *RUN, FSDP, f"trainer.max_steps={STOP + 2}"))
    summary = _summary(run)
    assert summary["resumed_from"] == str(last) and summary["resumed_at_step"] == STOP
    assert summary["global_step"] == STOP + 2
    assert not old.exists() and not tmp.exists()
    assert read_checkpoint(last, weights=False)["global_step"] == STOP + 2


# -- 8. the other tasks ---------------------------------------------------------------------------


@pytest.mark.parametrize("task", ["classification", "seq2seq"])
@pytest.mark.slow
def test_classification_and_seq2seq_train_sharded(task, tmp_path):
    """The classifier head is a sharding unit of its own; seq2seq validation generates (every
    rank runs the same decoding steps, each a collective)."""
    run = tmp_path / task
    extra = ["task=classification"] if task == "classification" else ["model=transformer"]
    result = zoo_train(
        *tiny_overrides(run, enc_dec=task == "seq2seq"),
        *extra,
        FSDP,
        "trainer.max_steps=3",
        "trainer.val_check_interval=3",
        "trainer.limit_val_batches=1",
    )
    _ok(result)
    summary = _summary(run)
    assert summary["task"] == task and summary["world_size"] == 2 and summary["global_step"] == 3
    assert torch.isfinite(torch.tensor(summary["metrics"]["val/loss"]))
    if task == "seq2seq":
        assert "val/bleu" in summary["metrics"]  # generation ran inside validation
        assert summary["metrics"]["val/bpb"] > 0
    ckpts = run / "checkpoints"
    gathered = read_checkpoint(ckpts / "last.ckpt")["state_dict"]
    assert _identical(read_checkpoint(ckpts / "full.ckpt")["state_dict"], gathered)
    if task == "classification":
        assert {"head.weight", "head.bias"} <= gathered.keys()  # the head's own unit, gathered too


# -- 9. activation checkpointing inside the sharding units ---------------------------------------


@pytest.mark.slow
def test_activation_checkpointing_under_fsdp_gives_the_same_weights(straight, tmp_path):
    """model.checkpoint_activations=true recomputes each layer (a sharding unit, gathered again
    for the recomputation) in backward: the same dropout masks, the same weights."""
    run = tmp_path / "recompute"
    _ok(zoo_train(*tiny_overrides(run), *RUN, FSDP, "model.checkpoint_activations=true"))
    diff = max_abs_diff(
        model_state(straight / "checkpoints" / "last.ckpt"), model_state(run / "checkpoints" / "last.ckpt")
    )
    assert diff <= 1e-6, diff


# -- 10. compiled layers under FSDP ---------------------------------------------------------------

COMPILED = [
    "data.max_examples=20",
    "data.global_batch_size=8",
    "model.dropout=0",
    "scheduler.total_steps=8",
    "trainer.max_steps=8",
    "trainer.val_check_interval=4",
    "callbacks.checkpoint_every_n_steps=2",
]


@pytest.mark.slow
def test_fsdp_with_compile_equals_eager_and_resumes_exactly(tmp_path):
    """task.compile=true under trainer=fsdp (it used to be refused): each layer compiled in place,
    then sharded. The weights after 8 steps equal the eager sharded run's within float tolerance,
    and a compiled run stopped at step 4 and continued ends with the uninterrupted compiled
    run's weights, bit for bit."""
    eager, compiled, stopped = tmp_path / "eager", tmp_path / "compiled", tmp_path / "stopped"
    _ok(zoo_train(*tiny_overrides(eager), *COMPILED, FSDP))
    _ok(zoo_train(*tiny_overrides(compiled), *COMPILED, FSDP, "task.compile=true"))
    assert "task.compile: 1 layer(s) compiled, each before it was sharded" in (compiled / "train.log").read_text()
    last = ("checkpoints", "last.ckpt")
    diff = max_abs_diff(model_state(eager.joinpath(*last)), model_state(compiled.joinpath(*last)))
    assert diff <= 1e-4, diff
    assert _summary(compiled)["metrics"]["val/loss"] == pytest.approx(_summary(eager)["metrics"]["val/loss"], abs=1e-4)

    _ok(zoo_train(*tiny_overrides(stopped), *COMPILED, FSDP, "task.compile=true", "trainer.max_steps=4"))
    _ok(zoo_train(*tiny_overrides(stopped), *COMPILED, FSDP, "task.compile=true"))  # on to step 8
    assert _summary(stopped)["resumed_at_step"] == 4
    assert _identical(model_state(stopped.joinpath(*last)), model_state(compiled.joinpath(*last)))
