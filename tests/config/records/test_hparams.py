"""A run's typed config as a checkpoint's hyper-parameters and back (`to_hparams`,
`from_hparams`): plain data both ways (a weights-only checkpoint, plain YAML), a round trip that
changes nothing, keys an older checkpoint predates read at their defaults, unknown keys refused,
and the task and Lightning's `load_from_checkpoint` built from them."""

from __future__ import annotations

import dataclasses
import io

import pytest
import torch
import yaml

import zoo
from zoo.config.errors import ConfigError
from zoo.config.records.hparams import SECTIONS, TrainedConfig, from_hparams, to_hparams
from zoo.config.schema.train import OptimConfig
from zoo.config.schema.validate import validate

SMALL = [
    "model.d_model=16",
    "model.n_heads=2",
    "model.n_layers=1",
    "optim=muon",
    "scheduler=wsd",
    "task.z_loss=0.0001",
    "trainer.max_steps=100",
]


@pytest.fixture(scope="module")
def spec():
    return validate(zoo.compose(SMALL))


def test_the_hparams_are_plain_data_that_a_weights_only_checkpoint_and_yaml_keep(spec):
    hparams = to_hparams(spec, special_ids={"pad": 0, "bos": None}, labels=["a", "b"])
    assert set(hparams) == {*SECTIONS, "extra"}
    buffer = io.BytesIO()
    torch.save({"hyper_parameters": hparams}, buffer)
    buffer.seek(0)
    assert torch.load(buffer, weights_only=True)["hyper_parameters"] == hparams
    text = yaml.safe_dump(hparams)  # refuses any object that is not plain data
    assert "!!python" not in text and yaml.safe_load(text) == hparams


def test_the_typed_config_comes_back_from_its_hparams(spec):
    trained = from_hparams(to_hparams(spec, special_ids={"pad": 0}, labels=["a", "b"]))
    assert (trained.model, trained.task, trained.optim, trained.scheduler) == (
        spec.model,
        spec.task,
        spec.optim,
        spec.scheduler,
    )
    assert trained.extras.tokenizer_kind == spec.tokenizer.kind.value and trained.extras.data == spec.data.to_dict()
    assert trained.extras.special_ids == {"pad": 0} and trained.extras.labels == ["a", "b"]
    assert to_hparams(trained) == to_hparams(spec, special_ids={"pad": 0}, labels=["a", "b"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        trained.optim = OptimConfig()  # type: ignore[misc]


def test_an_older_checkpoints_hparams_read_at_the_defaults_of_keys_it_predates(spec):
    hparams = to_hparams(spec)
    old = {
        "model": {k: v for k, v in hparams["model"].items() if not k.startswith(("parametrization", "mup_"))},
        "task": {k: v for k, v in hparams["task"].items() if not k.startswith(("moe_", "z_loss"))},
        "optim": None,  # a task built without an optimizer section
        # no scheduler section, no extras
    }
    trained = from_hparams(old)
    assert trained.model.parametrization.value == "standard" and trained.task.z_loss == 0.0
    assert trained.optim == OptimConfig() and trained.scheduler == type(spec.scheduler)()
    assert trained.extras.tokenizer_kind == "byte" and trained.extras.data is None


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda h: h["task"].update(future_key=1), "unknown key task.future_key"),
        (lambda h: h["optim"].update(lr=float("nan")), "optim.lr must be a finite number"),
        (lambda h: h.pop("task"), "lack task"),
        (lambda h: h["model"].update(n_heads=3), "n_heads"),
    ],
)
def test_hparams_zoo_cannot_read_are_refused_on_one_line(spec, change, message):
    hparams = to_hparams(spec)
    change(hparams)
    with pytest.raises(ConfigError, match=message) as caught:
        from_hparams(hparams)
    assert "\n" not in str(caught.value)


def test_the_task_and_lightnings_load_from_checkpoint_build_from_the_hparams(spec, tmp_path):
    from zoo.tasks import TASKS

    task = TASKS[spec.task.kind](**to_hparams(spec, special_ids={"pad": 0}))
    assert isinstance(from_hparams(task.hparams), TrainedConfig)
    assert (task.model_config, task.task_config, task.optim_config, task.scheduler_config) == (
        spec.model,
        spec.task,
        spec.optim,
        spec.scheduler,
    )
    path = tmp_path / "task.ckpt"
    torch.save(
        {"hyper_parameters": dict(task.hparams), "state_dict": task.state_dict(), "pytorch-lightning_version": "2.5.0"},
        path,
    )
    loaded = type(task).load_from_checkpoint(path, weights_only=True)
    assert loaded.optim_config == spec.optim and loaded.model_config == spec.model
    for name, value in task.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name
