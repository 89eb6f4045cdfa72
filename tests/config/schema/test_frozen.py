"""The validated config is frozen: what training, tasks, resume and checkpoints receive is the
config the run was checked with. Its schema still takes overrides when Hydra composes it."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys

import pytest

import zoo
from zoo.config.schema.validate import validate


def test_the_validated_config_cannot_be_changed_and_its_composition_can():
    cfg = zoo.compose(["seed=3", "model.d_model=32", "trainer.max_steps=100"])
    spec = validate(cfg)
    assert spec.seed == 3 and spec.model.d_model == 32
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 4  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.ckpt_path = "last"  # type: ignore[misc]
    assert dataclasses.replace(spec, seed=4).seed == 4 and spec.seed == 3


def _sections(obj, prefix: str) -> list[tuple[str, object]]:
    """Every dataclass node of the validated config below `obj` (itself included), by path."""
    found = [(prefix, obj)]
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            found += _sections(value, f"{prefix}.{f.name}")
    return found


SPEC = validate(
    zoo.compose(
        [
            "trainer.max_steps=100",
            "model.position.kind=rope",
            "+logger.mlflow.tags.team=zoo",
            "logger.wandb.tags=[a,b]",
        ]
    )
)
NODES = _sections(SPEC, "spec")


def test_every_section_of_the_config_is_a_frozen_node():
    paths = {path for path, _ in NODES}
    sections = {f"spec.{f.name}" for f in dataclasses.fields(SPEC) if dataclasses.is_dataclass(getattr(SPEC, f.name))}
    # every section but the one-value keys and the trainer mapping is a dataclass node, and so
    # is every section nested in one (model.position, logger.mlflow, logger.wandb)
    assert sections == {f"spec.{name}" for name in ("model", "task", "data", "tokenizer", "optim", "scheduler")} | {
        "spec.logger",
        "spec.callbacks",
    }
    assert {"spec.model.position", "spec.logger.mlflow", "spec.logger.wandb"} <= paths


@pytest.mark.parametrize("path,node", NODES, ids=[path for path, _ in NODES])
def test_a_leaf_of_every_section_cannot_be_assigned(path, node):
    for f in dataclasses.fields(node):
        before = getattr(node, f.name)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(node, f.name, before)
        assert getattr(node, f.name) is before
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.added = 1  # a key the schema does not have either


def test_the_trainer_section_cannot_be_changed_and_reads_typed():
    trainer = SPEC.trainer
    for change in (
        lambda: trainer.__setitem__("max_steps", 1),
        lambda: trainer.__delitem__("max_steps"),
        lambda: trainer.update(max_steps=1),
        lambda: trainer.pop("max_steps"),
        lambda: trainer.setdefault("fast_dev_run", 1),
        lambda: trainer.clear(),
    ):
        with pytest.raises(TypeError, match="cannot be changed"):
            change()
    with pytest.raises(AttributeError):
        trainer.max_steps = 1  # type: ignore[misc]
    assert trainer["max_steps"] == trainer.max_steps == 100 and isinstance(trainer.max_steps, int)
    assert (trainer.precision, trainer.strategy, trainer.num_nodes) == ("32-true", "auto", 1)
    assert dict(trainer)["max_steps"] == 100  # what L.Trainer(**trainer) receives


def test_list_and_dict_valued_fields_are_frozen_too():
    assert SPEC.optim.betas == (0.9, 0.95) and SPEC.logger.wandb.tags == ("a", "b")
    with pytest.raises(TypeError, match="cannot be changed"):
        SPEC.logger.mlflow.tags["team"] = "other"
    assert SPEC.logger.mlflow.tags == {"team": "zoo"}
    with pytest.raises(AttributeError):
        SPEC.callbacks.downstream.append("kjv_cloze")  # type: ignore[attr-defined]


def test_the_frozen_config_pickles_copies_and_reads_back_as_plain_data():
    import copy
    import pickle

    from zoo.config.schema.convert import plain

    for again in (pickle.loads(pickle.dumps(SPEC)), copy.deepcopy(SPEC)):
        assert again == SPEC and again.trainer.max_steps == 100
        with pytest.raises(TypeError):
            again.trainer["max_steps"] = 1
    as_dict = dataclasses.asdict(SPEC)
    assert as_dict["trainer"]["max_steps"] == 100 and as_dict["model"]["position"]["kind"] == SPEC.model.position.kind
    # what checkpoints and records hold: lists and dicts, as before the config was frozen
    assert plain(SPEC.optim)["betas"] == [0.9, 0.95] and type(plain(SPEC.logger.mlflow)["tags"]) is dict
    assert plain(SPEC.logger.wandb)["tags"] == ["a", "b"]


def test_a_changed_config_is_a_new_one():
    spec = dataclasses.replace(SPEC, model=dataclasses.replace(SPEC.model, d_model=512))
    assert (spec.model.d_model, SPEC.model.d_model) == (512, 256) and spec.optim is SPEC.optim


@pytest.mark.slow  # starts a Python process that imports zoo
def test_a_composed_config_unpickled_in_a_process_of_its_own_still_takes_overrides():
    """A sweep's job (hydra/launcher=slurm) unpickles Hydra's composed config in a new process
    and composes it again with the arm's overrides: the nodes' schemas come back as the unfrozen
    twins (by their own names), not as the frozen schemas, which would refuse the merge."""
    cfg = zoo.compose(["model.d_model=32"])
    code = (
        "import pickle, sys; from omegaconf import OmegaConf; "
        "cfg = pickle.loads(sys.stdin.buffer.read()); "
        "merged = OmegaConf.merge(cfg, {'model': {'d_model': 48, 'position': {'kind': 'rope'}}}); "
        "print(type(OmegaConf.to_object(merged.model)).__qualname__, merged.model.d_model)"
    )
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(cfg), capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert done.stdout.decode().split() == ["ThawedModelConfig", "48"]
