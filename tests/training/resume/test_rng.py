"""The random generators a checkpoint carries: captured, saved as plain data, restored exactly,
and on resume each rank takes its own state back (rank r of a resumed run: saved rank r mod n)."""

from __future__ import annotations

import io
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from zoo.training.resume.rng import RngState, capture, restore


def _draws() -> tuple:
    return (
        torch.rand(4).tolist(),
        random.random(),
        random.getrandbits(64),
        np.random.rand(3).tolist(),
        np.random.randn(),
    )


def _seeded(seed: int) -> dict:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    np.random.randn()  # numpy keeps a cached Gaussian: the state must carry it too
    return capture()


def test_restore_replays_torch_python_and_numpy_draws_exactly():
    state = _seeded(11)
    first = _draws()
    _draws()  # move every generator on
    restore(state)
    assert _draws() == first


def test_the_state_survives_a_weights_only_load():
    state = _seeded(5)
    expected = _draws()
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    _seeded(6)
    restore(torch.load(buffer, weights_only=True))
    assert _draws() == expected


def test_each_rank_takes_its_own_state_back_at_the_first_batch():
    saved = [_seeded(100 + r) for r in range(2)]
    expected = []
    for state in saved:
        restore(state)
        expected.append(_draws())
    for rank in range(4):  # resumed on 4 ranks: ranks 0, 2 take rank 0's state; 1, 3 take rank 1's
        callback = RngState()
        callback.load_state_dict({"ranks": saved})
        _seeded(999)
        trainer = SimpleNamespace(global_rank=rank)
        callback.on_train_batch_start(trainer, None, None, 0)
        assert _draws() == expected[rank % 2]


def test_a_restored_state_is_applied_once():
    callback = RngState()
    callback.load_state_dict({"ranks": [_seeded(1)]})
    trainer = SimpleNamespace(global_rank=0)
    callback.on_train_batch_start(trainer, None, None, 0)
    first = _draws()
    callback.on_train_batch_start(trainer, None, None, 1)  # must not rewind the generators again
    assert _draws() != first


def test_a_single_process_saves_its_own_state_as_rank_zero():
    callback = RngState()
    state = _seeded(3)
    saved = callback.state_dict()
    assert len(saved["ranks"]) == 1
    assert torch.equal(saved["ranks"][0]["torch"], state["torch"])
    assert saved["ranks"][0]["python"] == state["python"]


def _gather_on_rank(rank: int, world: int, port: int, out: str) -> None:
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        _seeded(100 + rank)
        callback = RngState()
        callback.setup(SimpleNamespace(world_size=world), None, "fit")
        state = callback.state_dict()
        if rank == 0:
            torch.save({"state": state, "own": capture()}, out)
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_two_ranks_save_both_their_states(tmp_path):
    """In a real 2-process group every rank's generators go into the checkpoint, in rank order."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "state.pt"
    mp.spawn(_gather_on_rank, args=(2, port, str(out)), nprocs=2)
    saved = torch.load(out, weights_only=False)
    ranks = saved["state"]["ranks"]
    assert len(ranks) == 2
    assert torch.equal(ranks[0]["torch"], saved["own"]["torch"])
    assert torch.equal(ranks[0]["torch"], _seeded(100)["torch"])
    assert torch.equal(ranks[1]["torch"], _seeded(101)["torch"])
