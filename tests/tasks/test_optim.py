"""Learning-rate schedules and weight-decay groups."""

from __future__ import annotations

import math

import pytest
import torch

import zoo
from tests.conftest import tiny
from zoo.config.schema.train import OptimConfig, SchedulerConfig
from zoo.tasks.optim import build_optimizer, parameter_groups, schedule


def test_inverse_sqrt_schedule_is_vaswani_eq_3():
    f = schedule(SchedulerConfig(kind="inverse_sqrt", warmup_steps=4000), total_steps=None, d_model=512)
    for n in (1, 100, 3999, 4000, 4001, 20000):
        expected = 512**-0.5 * min(n**-0.5, n * 4000**-1.5)
        assert f(n - 1) == pytest.approx(expected)
    peak = max(range(10000), key=f)
    assert peak == 3999  # the maximum is at step n = warmup


def test_cosine_schedule_warms_up_then_decays_to_the_floor():
    f = schedule(SchedulerConfig(kind="cosine", warmup_steps=10, min_lr_ratio=0.1), total_steps=110, d_model=8)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(60) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert f(110) == pytest.approx(0.1) and f(500) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="total steps"):
        schedule(SchedulerConfig(kind="cosine", warmup_steps=10), total_steps=None, d_model=8)


@pytest.mark.parametrize("kind", ["constant", "cosine", "inverse_sqrt"])
@pytest.mark.parametrize("warmup", [1, 4, 10])
def test_warmup_rises_to_exactly_one_and_no_schedule_exceeds_it(kind, warmup):
    """Linear warmup reaches the base rate at step warmup - 1 and stays there at step warmup (the
    first step after it); no step of any schedule is above the base rate (inverse_sqrt is scaled by
    d_model^-0.5 and peaks at warmup^-0.5 of that)."""
    f = schedule(SchedulerConfig(kind=kind, warmup_steps=warmup), total_steps=50, d_model=1)
    peak = 1.0 if kind != "inverse_sqrt" else warmup**-0.5
    values = [f(step) for step in range(60)]
    assert values[:warmup] == pytest.approx([(i + 1) / warmup * peak for i in range(warmup)])
    assert values[warmup - 1] == pytest.approx(peak)
    assert values[warmup] == pytest.approx(peak if kind != "inverse_sqrt" else (warmup + 1) ** -0.5)
    assert max(values) <= peak + 1e-12
    assert all(b <= a + 1e-12 for a, b in zip(values[warmup - 1 :], values[warmup:]))  # never rises again


@pytest.mark.parametrize(
    "total, expected",
    [
        (3, [0.5, 1.0, 1.0, 0.1, 0.1]),  # the decay is one step long: the floor at the step after it
        (4, [0.5, 1.0, 1.0, 0.55, 0.1]),  # two steps: halfway (cos(pi/2) = 0) then the floor
    ],
)
def test_cosine_decay_of_a_few_steps(total, expected):
    f = schedule(
        SchedulerConfig(kind="cosine", warmup_steps=2, min_lr_ratio=0.1, total_steps=total), total_steps=None, d_model=8
    )
    assert [f(step) for step in range(5)] == pytest.approx(expected)


def test_constant_schedule():
    assert schedule(SchedulerConfig(kind="constant", warmup_steps=0), total_steps=None, d_model=8)(123) == 1.0
    f = schedule(SchedulerConfig(kind="constant", warmup_steps=4), total_steps=None, d_model=8)
    assert [f(i) for i in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("family", ["decoder_only", "encoder_decoder"])
@pytest.mark.parametrize("norm_type", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("tie", [True, False])
def test_no_weight_decay_on_norms_biases_and_embeddings(family, norm_type, tie):
    model = zoo.build_model(tiny(family, "relative", norm_type=norm_type, tie_embeddings=tie))
    decay, no_decay = parameter_groups(model, 0.1)
    decayed = {id(p) for p in decay["params"]}
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            is_matrix = isinstance(module, torch.nn.Linear) and name == "weight" and p is not model.lm_head.weight
            assert (id(p) in decayed) == is_matrix, (type(module).__name__, name)
    assert no_decay["weight_decay"] == 0.0
    n = sum(p.numel() for g in (decay, no_decay) for p in g["params"])
    assert n == sum(p.numel() for p in model.parameters())  # every parameter exactly once


def test_optimizer_kinds():
    model = zoo.build_model(tiny())
    assert isinstance(build_optimizer(model, OptimConfig(kind="adamw")), torch.optim.AdamW)
    adam = build_optimizer(model, OptimConfig(kind="adam", betas=[0.9, 0.98], eps=1e-9))
    assert isinstance(adam, torch.optim.Adam) and adam.defaults["betas"] == (0.9, 0.98)
