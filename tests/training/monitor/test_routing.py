"""The routing monitor (callbacks.routing_every, model.ffn=moe): zoo-train writes each mixture
layer's expert load, dropped share and router entropy and their means to metrics.csv at steps 0,
N, 2N, ... and the last, and the last values to summary.json; the router losses are logged apart; a dense model
gets no monitor; two ranks (DDP and FSDP2 over gloo) train a mixture to the same weights (four,
HSDP's 2 x 2 mesh against DDP over four, are tests/training/distributed/test_hsdp.py's run)."""

from __future__ import annotations

import csv
import json
import math

import pytest

import zoo
from tests.cli.conftest import tiny_overrides, zoo_train
from tests.training.distributed.conftest import MOE, max_abs_diff, model_state
from zoo.config.errors import ConfigError
from zoo.config.schema.train import CallbacksConfig
from zoo.training.callbacks import build_callbacks


def _rows(path) -> dict[int, dict[str, float]]:
    """{step: {name: value}} of the monitor's columns in a CSV metrics file."""
    out: dict[int, dict[str, float]] = {}
    for row in csv.DictReader(open(path)):
        values = {
            k: float(v)
            for k, v in row.items()
            if k.startswith("train/moe_") and v not in ("", None) and "loss" not in k
        }
        if values:
            out.setdefault(int(row["step"]), {}).update(values)
    return out


def test_zoo_train_writes_the_routing_to_metrics_csv_and_summary(tmp_path):
    cfg = zoo.compose(
        [o for o in tiny_overrides() if not o.startswith("hydra.")]
        + MOE
        + ["trainer.max_steps=5", "trainer.log_every_n_steps=4", "callbacks.routing_every=2"]
    )
    train = zoo.train(cfg, tmp_path)
    rows = _rows(tmp_path / "metrics.csv")
    assert sorted(rows) == [0, 2, 4]
    for values in rows.values():  # one mixture layer (the second of two)
        loads = [values[f"train/moe_load/layer_0/expert_{e}"] for e in range(4)]
        assert sum(loads) == pytest.approx(1.0, abs=1e-6)
        assert values["train/moe_load_max"] == pytest.approx(4 * max(loads), abs=1e-6)
        assert values["train/moe_dropped"] == 0.0  # dropless
        assert 0 < values["train/moe_entropy"] <= math.log(4) + 1e-6
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {k: v for k, v in summary["metrics"].items() if k in rows[4]} == rows[4]
    logged = list(csv.DictReader(open(tmp_path / "metrics.csv")))
    balance = [float(r["train/moe_balance_loss"]) for r in logged if r.get("train/moe_balance_loss")]
    z = [float(r["train/moe_router_z_loss"]) for r in logged if r.get("train/moe_router_z_loss")]
    assert balance and all(b >= 1.0 - 1e-6 for b in balance)  # E·Σ f·P >= 1 here (1 = balanced)
    assert z and all(v > 0 for v in z)
    assert summary["model"]["active_non_embedding_params"] < summary["model"]["non_embedding_params"]
    assert train.summary["metrics"] == summary["metrics"]


def test_a_dense_model_gets_no_monitor_and_a_negative_interval_is_refused(tmp_path):
    assert build_callbacks(zoo.compose(["callbacks.routing_every=1"]), tmp_path).routing is None
    assert build_callbacks(zoo.compose(["callbacks.routing_every=1", *MOE]), tmp_path).routing is not None
    with pytest.raises(ConfigError, match="callbacks.routing_every must be >= 0"):
        CallbacksConfig(routing_every=-1)


@pytest.mark.slow
def test_ddp_and_fsdp_train_a_mixture_to_the_same_weights(tmp_path):
    """trainer=ddp_cpu and trainer=fsdp_cpu (2 gloo processes each; FSDP shards the stacked expert
    weights like any weight): the same weights after 4 steps, and the routing averaged over ranks."""
    run = [
        *MOE,
        "trainer.max_steps=4",
        "trainer.val_check_interval=4",
        "data.global_batch_size=8",
        "callbacks.routing_every=2",
    ]
    for trainer in ("ddp_cpu", "fsdp_cpu"):
        done = zoo_train(*tiny_overrides(tmp_path / trainer), *run, f"trainer={trainer}")
        assert done.returncode == 0, done.stderr[-3000:]
    diff = max_abs_diff(
        model_state(tmp_path / "ddp_cpu" / "checkpoints" / "last.ckpt"),
        model_state(tmp_path / "fsdp_cpu" / "checkpoints" / "last.ckpt"),
    )
    assert diff <= 1e-5, diff
    for trainer in ("ddp_cpu", "fsdp_cpu"):
        summary = json.loads((tmp_path / trainer / "summary.json").read_text())
        assert summary["world_size"] == 2
        loads = [summary["metrics"][f"train/moe_load/layer_0/expert_{e}"] for e in range(4)]
        assert sum(loads) == pytest.approx(1.0, abs=1e-6)
