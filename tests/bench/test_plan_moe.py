"""zoo-plan follows the mixture-of-experts layers (model.ffn=moe) by what they hold at the step's
peak: the expert weights (the stacked matrices and the shared experts, in the weights), the
router's scores and choices, the dispatch buffers and the experts' activations (in the
activations); a sharded plan holds its share of the expert weights; a dense model has none."""

from __future__ import annotations

import zoo
from tests.conftest import tiny
from zoo.config import ModelConfig
from zoo.plan.options import PlanOptions
from zoo.plan.planner import plan
from zoo.plan.report import as_json, table
from zoo.plan.trace import ACTIVATIONS, DISPATCH, EXPERT_ACTIVATIONS, EXPERT_WEIGHTS, ROUTER, WEIGHTS

B, T, E, K, D, F, LAYERS = 2, 16, 4, 2, 16, 32, 2


def _options(**kw) -> PlanOptions:
    return PlanOptions(**{**dict(batch=B, seq_len=T, device="cpu", precision="32-true", memory="1GiB"), **kw})


def _moe(**kw) -> ModelConfig:
    return ModelConfig(**tiny(ffn="moe", moe_experts=E, moe_top_k=K, bias=False, d_ff=F, d_model=D, **kw))


def test_a_mixture_is_planned_by_its_parts():
    cfg = _moe(moe_shared=1)
    p = plan(cfg, _options())
    model = zoo.build_model(cfg)
    experts = sum(
        4 * q.numel() for name, q in model.named_parameters() if ".ff.experts." in name or ".ff.shared." in name
    )
    moe = p.step.moe
    assert moe[EXPERT_WEIGHTS] == experts and experts <= p.parts[WEIGHTS]
    N = B * T
    assert moe[ROUTER] >= LAYERS * 2 * 4 * N * E  # each layer keeps its float32 logits and probabilities
    assert moe[DISPATCH] >= LAYERS * 4 * N * K * D  # and each slot's gathered token (N·K, D)
    assert moe[EXPERT_ACTIVATIONS] >= LAYERS * 4 * N * K * F  # and the routed experts' hidden (N·K, F)
    assert moe[ROUTER] + moe[DISPATCH] + moe[EXPERT_ACTIVATIONS] <= p.parts[ACTIVATIONS]
    assert "of which the mixture-of-experts layers hold: expert weights" in table(p)
    assert as_json(p, 1)["moe"] == moe


def test_a_sharded_plan_holds_its_share_of_the_experts_and_a_dense_one_none():
    cfg = _moe()
    whole, half = plan(cfg, _options()), plan(cfg, _options(strategy="fsdp", world_size=2))
    assert half.step.moe[EXPERT_WEIGHTS] == whole.step.moe[EXPERT_WEIGHTS] // 2
    dense = plan(ModelConfig(**tiny(bias=False, d_ff=F, d_model=D)), _options())
    assert dense.step.moe == {} and "mixture" not in table(dense) and "moe" not in as_json(dense, 1)
