"""Combinations refused before any data is read or weights are built, and what every task
hands to its optimizer."""

from __future__ import annotations

import pytest

import zoo
from tests.conftest import tiny
from zoo.config import ConfigError
from zoo.config.schema.validate import validate
from zoo.tasks import TASKS


@pytest.mark.parametrize(
    "overrides, fragments",
    [
        (["model=bert", "task=causal_lm"], ["causal_lm", "decoder_only", "encoder_only"]),
        (["model=t5", "task=classification"], ["classification", "encoder_decoder"]),
        (["data.seq_len=512"], ["512", "max_seq_len=256"]),
        (
            [
                "model=transformer",
                "model/position=learned",
                "model.max_seq_len=32",
                "data.seq_len=32",
                "task.generate_max_tokens=40",
            ],
            ["generate_max_tokens", "40", "32"],
        ),
        (["scheduler=constant", "scheduler.min_lr_ratio=0.5"], ["min_lr_ratio", "cosine"]),
        (["scheduler=inverse_sqrt"], ["inverse_sqrt", "optim.lr"]),
        (["trainer.max_steps=10"], ["cosine", "10", "warmup"]),
        (["trainer.max_steps=-1", "trainer.max_epochs=-1"], ["max_steps", "max_epochs"]),
        (["model=t5", "model.position.max_distance=16"], ["max_distance", "16"]),
        (["model=t5", "model.position.num_buckets=3"], ["num_buckets", "3"]),
    ],
)
@pytest.mark.slow
def test_refused_before_training(overrides, fragments):
    with pytest.raises(ConfigError) as info:
        validate(zoo.compose(overrides))
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


@pytest.mark.slow
def test_the_default_and_every_recipe_validate():
    from pathlib import Path

    validate(zoo.compose())
    validate(zoo.compose(["scheduler=inverse_sqrt", "optim=adam"]))
    recipes = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "recipes").glob("*.yaml"))
    assert recipes
    for name in recipes:
        validate(zoo.compose(config_name=name))


@pytest.mark.parametrize("kind", sorted(k.value for k in TASKS))
def test_the_optimizer_holds_every_trainable_parameter_of_the_task(kind):
    family = {
        "causal_lm": "decoder_only",
        "masked_lm": "encoder_only",
        "seq2seq": "encoder_decoder",
        "classification": "encoder_only",
    }[kind]
    task = TASKS[kind](
        model=tiny(family, "learned", tie_embeddings=False),
        task={"kind": kind},
        scheduler={"kind": "constant"},
        extra={"labels": ["a", "b"]},
    )
    optimizer = task.configure_optimizers()["optimizer"]
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    for name, p in task.named_parameters():
        assert id(p) in held, f"{name} is not optimized"
    if kind == "classification":
        assert task.model.lm_head is None
        decayed = {id(p) for p in optimizer.param_groups[0]["params"]}
        assert id(task.head.weight) in decayed and id(task.head.bias) not in decayed
