"""Every tool asks a kind's row, over every (axis, kind) of `zoo.config.facts.axes.AXES`, the
run-level axes (optimizer, schedule, task, tokenizer) included: zoo-plan plans it (or refuses it
on one line), zoo-bench's zoo subject takes a training step with every optimizer, zoo-compare
names an arm by the kind, and a model kind exports to Hugging Face or is refused on one line.
The model-level build, count and plan are tests/contract/test_axes.py's; training and resuming
tests/contract/test_axes_resume.py's (slow tier)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import zoo
from tests.contract.conftest import MODEL_PAIRS, PAIRS, model_kwargs, pair_id
from zoo.bench.workload import Workload
from zoo.bench.zoo_subject import ZooSubject
from zoo.compare.report import group_arms
from zoo.compare.runs import Run, RunStatus
from zoo.config import ConfigError, ModelConfig
from zoo.config.facts.optimizers import OPTIMIZER_FACTS, OptimizerKind, RunShape, optimizer_refusal
from zoo.interop.hf import UnsupportedConfig, to_hf
from zoo.plan.options import PlanOptions
from zoo.plan.planner import plan

RUN_PAIRS = [(a, k) for a, k in PAIRS if a.run_level]


def _one_line(message: str, *names: str) -> None:
    assert "\n" not in message and any(name in message for name in names), message


def _plan_options(settings: dict, **extra) -> PlanOptions:
    return PlanOptions(
        batch=1,
        seq_len=16,
        device="cpu",
        precision="32-true",
        memory="1GiB",
        optim=settings.get("optim.kind", OptimizerKind.adamw.value),
        **extra,
    )


@pytest.mark.parametrize("ax,kind", RUN_PAIRS, ids=pair_id)
def test_zoo_plan_plans_a_run_level_kind_or_refuses_it_on_one_line(ax, kind):
    """The planner builds the kind's optimizer from the settings its row reads (an optimizer
    without kernels takes no optim.implementation) and plans the model's parameters."""
    settings = ax.settings(kind)
    cfg = ModelConfig(**model_kwargs(settings))
    try:
        planned = plan(cfg, _plan_options(settings))
    except ConfigError as refused:
        _one_line(str(refused), kind.value, ax.key, "model.family")
        return
    params = zoo.summarize(zoo.build_model(cfg)).total_params
    assert planned.step.param_count == params


@pytest.mark.parametrize("kind", list(OptimizerKind), ids=str)
def test_an_optimizers_refusals_are_its_rows_predicates_in_zoo_plan(kind):
    """zoo-plan refuses what the row's predicates refuse (the strategy from its options, the
    parametrization once it holds the model), with the row's line, and plans the rest; every
    refusal of the row fires for one of these shapes."""
    fired = set()
    for strategy in ("ddp", "fsdp"):
        shape = RunShape(strategy=strategy, sharded=strategy == "fsdp", strategy_key="strategy")
        expected = optimizer_refusal(kind, shape)
        if expected is not None:
            with pytest.raises(ConfigError) as refused:
                _plan_options({"optim.kind": kind.value}, strategy=strategy, world_size=2)
            assert str(refused.value) == expected
            fired.add(expected)
            continue
        options = _plan_options({"optim.kind": kind.value}, strategy=strategy, world_size=2)
        for parametrization in ("standard", "mup"):
            cfg = ModelConfig(**model_kwargs({}), parametrization=parametrization)
            expected = optimizer_refusal(kind, options.run_shape(parametrization))
            if expected is None:
                assert plan(cfg, options).step.param_count > 0
                continue
            with pytest.raises(ConfigError) as refused:
                plan(cfg, options)
            assert str(refused.value) == expected
            fired.add(expected)
    assert len(fired) == len(OPTIMIZER_FACTS[kind].refuses)


@pytest.mark.parametrize("kind", list(OptimizerKind), ids=str)
def test_zoo_bench_takes_a_training_step_with_every_optimizer(kind):
    """zoo-bench's zoo subject passes each optimizer only the workload settings its row reads."""
    work = Workload(model=ModelConfig(**model_kwargs({})), batch=2, seq_len=16, device=torch.device("cpu"))
    subject = ZooSubject(work, optim={"kind": kind.value})
    before = [p.detach().clone() for p in subject.model.parameters()]
    subject.train_step(work.training_batch())
    assert subject.task.optim_config.kind == kind
    assert any(not torch.equal(a, b) for a, b in zip(before, subject.model.parameters(), strict=True))


@pytest.mark.parametrize("ax,kind", PAIRS, ids=pair_id)
def test_zoo_compare_names_an_arm_by_its_kind(ax, kind):
    """Two arms, the axis's first kind and this one: the arms differ by the axis key (and what
    selecting the kind sets with it), shown as the kind's value."""
    first = ax.settings(list(ax.kinds)[0])
    settings = ax.settings(kind)
    base = {**{key: None for key in settings}, **first, "seed": 0}
    runs = [
        Run(path=Path(name), overrides=[], config=config, status=RunStatus.finished)
        for name, config in [("a", base), ("b", {**base, **settings})]
    ]
    arms, keys = group_arms(runs)
    if settings.items() <= base.items():
        assert len(arms) == 1
        return
    assert ax.key in keys and arms[1].settings[ax.key] == kind.value


@pytest.mark.parametrize("ax,kind", MODEL_PAIRS, ids=pair_id)
def test_a_model_kind_exports_to_hugging_face_or_is_refused_on_one_line(ax, kind):
    pytest.importorskip("transformers", reason="the hf extra exports to transformers")
    try:
        cfg = ModelConfig(**model_kwargs(ax.settings(kind)))
    except ConfigError:
        pytest.skip("this kind is refused with the tiny decoder (test_axes covers the refusal)")
    model = zoo.build_model(cfg).eval()
    try:
        exported = to_hf(model)
    except UnsupportedConfig as refused:
        assert "\n" not in str(refused) and "matches no supported" in str(refused)
        return
    ids = torch.randint(0, cfg.vocab_size, (1, 8))
    with torch.no_grad():
        ours = model(ids).logits
        theirs = exported(input_ids=ids).logits
    torch.testing.assert_close(theirs, ours, rtol=1e-4, atol=1e-4)
