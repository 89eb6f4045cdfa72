"""The average of the weights (`optim.ema`) and checkpoint averaging: the decay rule and its
warmup on a real Lightning fit, every refusal on one line, validation of the average (val/loss
and val_ema/loss equal zoo-eval's raw and weights=ema figures), exact resume, and zoo-eval
average=k (the mean of the run's last k checkpoints, one architecture)."""

from __future__ import annotations

import json

import lightning as L
import pytest
import torch
from lightning.pytorch.demos.boring_classes import BoringModel
from safetensors.torch import load_file

from tests.cli.conftest import tiny_overrides
from zoo.config.errors import ConfigError
from zoo.config.facts.ema import EMA_STATE, EMA_UPDATES, EmaEval, ema_decay
from zoo.config.schema.train import OptimConfig
from zoo.training.checkpoint.averaging import load_weights, mean_state
from zoo.training.checkpoint.files import read_checkpoint
from zoo.training.ema import WeightAverage, trainable


def test_the_decay_warms_up_as_stated():
    assert ema_decay(0.999, 0, warmup=False) == 0.999
    assert ema_decay(0.999, 0, warmup=True) == pytest.approx(0.1)  # (1 + 0) / (10 + 0)
    assert ema_decay(0.999, 90, warmup=True) == pytest.approx(91 / 100)
    assert ema_decay(0.9, 10**6, warmup=True) == 0.9  # capped at optim.ema


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"ema": 1.0}, "optim.ema must be a decay in (0, 1)"),
        ({"ema": 0}, "optim.ema must be a decay in (0, 1)"),
        ({"ema": 0.9, "ema_every": 0}, "optim.ema_every must be a whole number"),
        ({"ema_every": 2}, "optim.ema_every applies to the weights' average"),
        ({"ema_warmup": True}, "optim.ema_warmup applies to the weights' average"),
        ({"ema_eval": "both"}, "optim.ema_eval applies to the weights' average"),
        ({"ema": 0.9, "ema_eval": "best"}, "optim.ema_eval"),
    ],
)
def test_bad_settings_are_refused_on_one_line(settings, says):
    with pytest.raises(ConfigError) as err:
        OptimConfig(**settings)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_every_optimizer_reads_the_average():
    for kind in ("adamw", "adam", "muon"):
        assert OptimConfig(kind=kind, ema=0.99).ema == 0.99


class _After(L.Callback):
    """The weights after each optimizer step (listed after the average, as the saving callbacks are)."""

    def __init__(self) -> None:
        self.weights: list[dict[str, torch.Tensor]] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.weights.append({k: p.detach().clone() for k, p in trainer.lightning_module.named_parameters()})


def test_the_average_follows_the_stated_rule_on_a_real_fit(tmp_path):
    torch.manual_seed(0)
    model = BoringModel()
    start = {k: p.detach().clone().float() for k, p in trainable(model).items()}
    ema, after = WeightAverage(0.8, every=2, warmup=True), _After()
    trainer = L.Trainer(
        default_root_dir=tmp_path,
        max_steps=7,
        accumulate_grad_batches=2,  # micro-batches: the average moves at optimizer steps only
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ema, after],
    )
    trainer.fit(model)
    expected, updates = start, 0
    steps = after.weights[1::2]  # the weights after each optimizer step (every second micro-batch)
    assert len(steps) == 7
    for step, weights in enumerate(steps, start=1):
        if step % 2:
            continue
        d = ema_decay(0.8, updates, warmup=True)
        expected = {k: d * expected[k] + (1 - d) * weights[k].float() for k in expected}
        updates += 1
    assert ema.updates == updates == 3
    assert ema.average is not None
    for k, value in expected.items():
        torch.testing.assert_close(ema.average[k], value, rtol=1e-6, atol=1e-7)
        assert not torch.equal(ema.average[k], steps[-1][k].float())  # an average, not the weights


RUN = [
    "optim.ema=0.9",
    "optim.ema_eval=both",
    "callbacks.save_top_k=-1",  # a checkpoint at every validation: average=k has some to average
]


def _eval(cli_here, *args: str) -> dict:
    result = cli_here("eval", *args, "batch_size=4", "limit_batches=2", "accelerator=cpu")
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


@pytest.mark.slow
def test_validation_of_the_average_and_zoo_eval_weights_and_average(tmp_path, cli_here):
    run = tmp_path / "run"
    trained = cli_here("train", *tiny_overrides(run), *RUN)
    assert trained.returncode == 0, trained.stderr[-3000:]
    metrics = json.loads((run / "summary.json").read_text())["metrics"]
    last = run / "checkpoints" / "last.ckpt"
    saved = read_checkpoint(last)
    assert saved[EMA_UPDATES] == saved["global_step"] == 6
    # tiny_overrides validates 2 batches of 4: zoo-eval on the same batches gives the same figures
    raw, ema = _eval(cli_here, f"ckpt={last}"), _eval(cli_here, f"ckpt={last}", "weights=ema")
    assert raw["metrics"]["loss"] == pytest.approx(metrics["val/loss"], rel=1e-6)
    assert ema["metrics"]["loss"] == pytest.approx(metrics["val_ema/loss"], rel=1e-6)
    assert raw["metrics"]["loss"] != ema["metrics"]["loss"]
    header = (run / "metrics.csv").read_text().splitlines()[0]
    assert "val_ema/loss" in header.split(",")

    # zoo-export and zoo-generate read the average with weights=ema
    exported = cli_here("export", f"ckpt={last}", "weights=ema", f"out={tmp_path / 'hf'}")
    assert exported.returncode == 0, exported.stderr[-3000:]
    tensors = load_file(tmp_path / "hf" / "model.safetensors")
    embed = saved[EMA_STATE]["model.embed.weight"]
    assert any(t.shape == embed.shape and torch.equal(t, embed) for t in tensors.values())
    assert not any(
        t.shape == embed.shape and torch.equal(t, saved["state_dict"]["model.embed.weight"]) for t in tensors.values()
    )
    generated = cli_here("generate", f"ckpt={last}", "weights=ema", "prompt=And", "max_new_tokens=4", "device=cpu")
    assert generated.returncode == 0, generated.stderr[-3000:]

    # average=2: the checkpoints of steps 6 and 3, their weights' mean
    task, sources = load_weights(run, average=2)
    assert [p.name for p in sources] == ["last.ckpt", "best-3.ckpt"]
    mean = mean_state([read_checkpoint(p)["state_dict"] for p in sources])
    for name, value in task.state_dict().items():
        if name.startswith("model."):
            torch.testing.assert_close(value, mean[name], rtol=0, atol=0)
    averaged = _eval(cli_here, f"ckpt={run}", "average=2")
    assert averaged["averaged"] == [str(p) for p in sources]
    assert averaged["metrics"]["loss"] not in (raw["metrics"]["loss"], ema["metrics"]["loss"])

    # refusals: more checkpoints than the run kept, another architecture among them, no average saved
    more = cli_here("eval", f"ckpt={run}", "average=3")
    assert more.returncode != 0 and "holds checkpoints of 2 step(s)" in more.stderr
    other = dict(read_checkpoint(run / "checkpoints" / "best-3.ckpt"))
    other["hyper_parameters"] = {**other["hyper_parameters"]}
    other["hyper_parameters"]["model"] = {**other["hyper_parameters"]["model"], "d_model": 64}
    other["global_step"] = 9
    torch.save(other, run / "checkpoints" / "best-9.ckpt")
    mixed = cli_here("eval", f"ckpt={run}", "average=2")
    assert mixed.returncode != 0 and "hold different models (model.d_model)" in mixed.stderr
    assert len(mixed.stderr.strip().splitlines()) == 1
    del saved[EMA_STATE]
    torch.save(saved, tmp_path / "plain.ckpt")
    plain = cli_here("eval", f"ckpt={tmp_path / 'plain.ckpt'}", "weights=ema")
    assert plain.returncode != 0 and "holds no average of the weights" in plain.stderr


RESUME = [
    "optim.ema=0.8",
    "optim.ema_every=2",
    "optim.ema_warmup=true",
    f"optim.ema_eval={EmaEval.ema.value}",
    "trainer.val_check_interval=4",
    "callbacks.checkpoint_every_n_steps=5",
    "scheduler.total_steps=12",  # the first leg's schedule is the whole run's
]


@pytest.mark.slow
def test_a_stopped_and_resumed_run_ends_with_the_uninterrupted_average(tmp_path, cli_here):
    straight, split = tmp_path / "straight", tmp_path / "split"
    one = cli_here("train", *tiny_overrides(straight), *RESUME, "trainer.max_steps=12")
    assert one.returncode == 0, one.stderr[-3000:]
    first = cli_here("train", *tiny_overrides(split), *RESUME, "trainer.max_steps=5")
    assert first.returncode == 0, first.stderr[-3000:]
    assert read_checkpoint(split / "checkpoints" / "last.ckpt")[EMA_UPDATES] == 2  # steps 2 and 4
    second = cli_here("train", *tiny_overrides(split), *RESUME, "trainer.max_steps=12", "ckpt_path=last")
    assert second.returncode == 0, second.stderr[-3000:]
    a = read_checkpoint(straight / "checkpoints" / "last.ckpt")
    b = read_checkpoint(split / "checkpoints" / "last.ckpt")
    assert a[EMA_UPDATES] == b[EMA_UPDATES] == 6
    assert a[EMA_STATE].keys() == b[EMA_STATE].keys()
    for name in a[EMA_STATE]:
        assert torch.equal(a[EMA_STATE][name], b[EMA_STATE][name]), name
        assert torch.equal(a["state_dict"][name], b["state_dict"][name]), name  # the raw weights, not the average
        assert not torch.equal(a[EMA_STATE][name], a["state_dict"][name].float()), name
