"""The instability monitor (callbacks.instability_every): it writes the maximum attention logit
(overall and per layer) and the output-logit statistics to the loggers at steps 0, N, 2N, ... and
the last step, whatever trainer.log_every_n_steps is; step 0's values are those of the initial
model on the step's batch, computed here by hand; between its steps and when it is off nothing
is registered on the model; zoo-train writes them to metrics.csv and their last values to
summary.json."""

from __future__ import annotations

import copy
import csv
import json

import lightning as L
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

import zoo
from tests.cli.conftest import tiny_overrides, zoo_train
from tests.conftest import tiny
from tests.nn.logit_by_hand import max_logit_by_hand
from zoo.config.errors import ConfigError
from zoo.config.facts.tasks import TaskKind
from zoo.config.schema.train import CallbacksConfig
from zoo.nn.attention import Attention
from zoo.tasks import TASKS
from zoo.training.callbacks import build_callbacks
from zoo.training.monitor.instability import InstabilityMonitor

NAMES = (
    "train/max_attn_logit",
    "train/max_attn_logit/layer_0",
    "train/max_attn_logit/layer_1",
    "train/output_logit_mean",
    "train/log_z_mean",
)


class _HooksSeen(L.Callback):
    """The forward hooks and recording flags on the model after each step (the monitor's
    own on_train_batch_end has run: it comes first in the list)."""

    def __init__(self):
        self.seen = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        flags = [m.record_max_logit for m in pl_module.model.modules() if isinstance(m, Attention)]
        self.seen.append((len(pl_module.model._forward_hooks), any(flags)))


def _rows(path) -> dict[int, dict[str, float]]:
    """{step: {name: value}} of the monitor's columns in a CSV metrics file."""
    out: dict[int, dict[str, float]] = {}
    for row in csv.DictReader(open(path)):
        values = {k: float(v) for k, v in row.items() if k in NAMES and v not in ("", None)}
        if values:
            out.setdefault(int(row["step"]), {}).update(values)
    return out


def _hand(model, batch) -> dict[str, float]:
    """The five values of `model` on `batch`, from its weights: each layer's q and k from its
    input and the fused projection (learned positions: no transform), and the logits of the
    model's own forward."""
    inputs = {}
    attentions = [m for m in model.modules() if isinstance(m, Attention)]
    hooks = [
        a.register_forward_pre_hook(lambda m, args, i=i: inputs.__setitem__(i, args[0]))
        for i, a in enumerate(attentions)
    ]
    ids = batch["input_ids"]
    B, T = ids.shape
    with torch.no_grad():
        logits = model(ids).logits.double()  # (B, T, V)
        keep = torch.ones(T, T, dtype=torch.bool).tril().expand(B, T, T)  # (B, T, S)
        layers = []
        for i, attention in enumerate(attentions):
            H, Dh = attention.n_heads, attention.head_dim
            qkv = inputs[i] @ attention.qkv_proj.weight.T  # (B, T, 3·H·Dh)
            q = qkv[..., : H * Dh].reshape(B, T, H, Dh).transpose(1, 2)  # (B, H, T, Dh)
            k = qkv[..., H * Dh : 2 * H * Dh].reshape(B, T, H, Dh).transpose(1, 2)  # (B, H, T, Dh)
            layers.append(max_logit_by_hand(q, k, keep))
    for hook in hooks:
        hook.remove()
    return {
        "train/max_attn_logit": max(layers),
        "train/max_attn_logit/layer_0": layers[0],
        "train/max_attn_logit/layer_1": layers[1],
        "train/output_logit_mean": float(logits.mean()),
        "train/log_z_mean": float(torch.logsumexp(logits, dim=-1).mean()),
    }


def test_values_at_the_promised_steps_and_step_zero_by_hand(tmp_path):
    task = TASKS[TaskKind.causal_lm](
        model=tiny(n_layers=2, n_heads=2, init_std=0.3, bias=False),
        task={"kind": "causal_lm", "loss_chunk": 5},
        optim={"lr": 0.05},
        scheduler={"kind": "constant", "warmup_steps": 0},
    )
    ids = torch.randint(0, 37, (2, 9))
    labels = torch.cat([ids[:, 1:], torch.full((2, 1), -100)], dim=1)
    batches = [{"input_ids": ids, "labels": labels}] * 5
    initial = copy.deepcopy(task.model)
    monitor, seen = InstabilityMonitor(every=2), _HooksSeen()
    trainer = L.Trainer(
        max_steps=5,
        callbacks=[monitor, seen],
        logger=CSVLogger(tmp_path, name="", version=""),
        log_every_n_steps=50,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
    )
    trainer.fit(task, torch.utils.data.DataLoader(batches, batch_size=None))
    rows = _rows(tmp_path / "metrics.csv")
    assert sorted(rows) == [0, 2, 4]  # every 2 steps; the last (4) is one of them
    assert all(sorted(values) == sorted(NAMES) for values in rows.values())
    for name, value in _hand(initial, batches[0]).items():
        assert rows[0][name] == pytest.approx(value, rel=1e-5, abs=1e-6), name
    assert rows[4] == pytest.approx(monitor.last)  # summary.json's values: the last step's
    assert rows[4]["train/max_attn_logit"] != rows[0]["train/max_attn_logit"]  # the weights moved
    assert seen.seen == [(0, False)] * 5  # the hook removed itself, the flags are off again


def test_the_last_step_is_measured_off_the_grid(tmp_path):
    task = TASKS[TaskKind.causal_lm](
        model=tiny(), task={"kind": "causal_lm"}, scheduler={"kind": "constant", "warmup_steps": 0}
    )
    ids = torch.randint(0, 37, (2, 6))
    batches = [{"input_ids": ids, "labels": ids}] * 4
    trainer = L.Trainer(
        max_steps=4,
        callbacks=[InstabilityMonitor(every=3)],
        logger=CSVLogger(tmp_path, name="", version=""),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
    )
    trainer.fit(task, torch.utils.data.DataLoader(batches, batch_size=None))
    assert sorted(_rows(tmp_path / "metrics.csv")) == [0, 3]


def test_off_by_default_no_callback(tmp_path):
    for overrides in ([], ["callbacks.instability_every=0"], ["callbacks.instability_every=null"]):
        callbacks = build_callbacks(zoo.compose(overrides), tmp_path)
        assert callbacks.instability is None
        assert not any(isinstance(c, InstabilityMonitor) for c in callbacks.all), overrides
    on = build_callbacks(zoo.compose(["callbacks.instability_every=7"]), tmp_path)
    assert on.instability in on.all and on.instability.every == 7


def test_a_negative_interval_is_refused():
    with pytest.raises(ConfigError, match="callbacks.instability_every must be >= 0"):
        CallbacksConfig(instability_every=-1)
    assert zoo.validate(zoo.compose(["callbacks.instability_every=5"])).callbacks.instability_every == 5


def test_zoo_train_writes_them_to_metrics_csv_and_summary(tmp_path):
    cfg = zoo.compose(
        [o for o in tiny_overrides() if not o.startswith("hydra.")]
        + ["trainer.max_steps=5", "trainer.log_every_n_steps=4", "callbacks.instability_every=2"]
    )
    train = zoo.train(cfg, tmp_path)
    rows = _rows(tmp_path / "metrics.csv")
    assert sorted(rows) == [0, 2, 4]
    summary = json.loads((tmp_path / "summary.json").read_text())["metrics"]
    assert summary["train/max_attn_logit"] == rows[4]["train/max_attn_logit"]
    assert summary["train/log_z_mean"] == rows[4]["train/log_z_mean"]
    assert summary["train/output_logit_mean"] == rows[4]["train/output_logit_mean"]
    assert train.summary["metrics"] == summary


@pytest.mark.slow
def test_two_ranks_log_the_values_of_the_whole_batch(tmp_path):
    """trainer=ddp_cpu (2 gloo processes, 4 sequences each): at step 0 (the same weights) the
    maximum over ranks and the mean of the ranks' means are one process's values on all 8."""
    one, two = tmp_path / "one", tmp_path / "two"
    steps = [
        "trainer.max_steps=3",
        "trainer.val_check_interval=3",
        "data.global_batch_size=8",
        "callbacks.instability_every=2",
    ]
    r1 = zoo_train(*tiny_overrides(one), *steps)
    assert r1.returncode == 0, r1.stderr[-3000:]
    r2 = zoo_train(*tiny_overrides(two), *steps, "trainer=ddp_cpu")
    assert r2.returncode == 0, r2.stderr[-3000:]
    rows1, rows2 = _rows(one / "metrics.csv"), _rows(two / "metrics.csv")
    assert sorted(rows1) == sorted(rows2) == [0, 2]
    assert set(rows2[0]) == {
        "train/max_attn_logit",
        "train/max_attn_logit/layer_0",
        "train/output_logit_mean",
        "train/log_z_mean",
    }
    for name, value in rows1[0].items():
        assert rows2[0][name] == pytest.approx(value, rel=1e-5, abs=1e-6), name
