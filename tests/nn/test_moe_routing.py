"""How a mixture picks and balances its experts (`zoo.config.facts.moe_routing`, `zoo.nn.moe`):
the selection bias of model.moe_balance=bias steers the choice and not the weights; its update
b_i += u·sign(mean load − load_i) from the loads of every micro-batch of a step, summed by the
reduction a data-parallel run passes; DeepSeek-V3's group-limited top-k against its definition
token by token; the routed scale; the dense first layers in the counts; the task adding the
balancing loss under aux_loss only; the one-line refusals."""

from __future__ import annotations

import pytest
import torch

import zoo
from tests.conftest import tiny
from zoo.config import ConfigError, ModelConfig
from zoo.config.facts.ffn import FFNKind, layer_kinds
from zoo.config.schema.params import active_non_embedding_params, non_embedding_params
from zoo.config.schema.validate import validate
from zoo.nn.moe import MoE, balance_experts, moe_layers
from zoo.tasks import TASKS

MOE = dict(ffn="moe", moe_experts=8, moe_top_k=2, bias=False, d_ff=24)


def _layer(**overrides) -> MoE:
    cfg = ModelConfig(**tiny(**{**MOE, **overrides}))
    layer = zoo.build_model(cfg).decoder.layers[-1].ff
    for p in layer.parameters():  # wide weights: routing far from ties
        torch.nn.init.normal_(p, std=0.5)
    return layer


def test_the_bias_steers_the_choice_and_leaves_the_weights_the_gates():
    layer = _layer(moe_balance="bias", moe_gate="sigmoid", moe_renorm=False)
    x = torch.randn(10, 16)
    logits, _, _, _ = layer.route(x)
    layer.router.score_bias[3] = 10.0  # past any sigmoid score: every token takes expert 3
    _, _, weights, experts = layer.route(x)
    assert (experts == 3).any(dim=-1).all()
    assert torch.equal(weights, logits.sigmoid().gather(1, experts))  # the scores, not the scores + bias
    layer.router.score_bias.zero_()
    _, _, plain, chosen = layer.route(x)
    assert torch.equal(plain, logits.sigmoid().topk(2, dim=-1).values) and not torch.equal(chosen, experts)


def test_the_bias_update_moves_each_expert_by_the_rate_toward_the_mean_load():
    layer = _layer(moe_balance="bias", moe_bias_rate=0.01, moe_experts=4)
    layer.update_bias(torch.tensor([4.0, 2.0, 2.0, 0.0]))  # mean 2
    assert torch.equal(layer.router.score_bias, torch.tensor([-0.01, 0.0, 0.0, 0.01]))
    layer.update_bias(torch.tensor([0.0, 1.0, 5.0, 2.0]))
    assert torch.allclose(layer.router.score_bias, torch.tensor([0.0, 0.01, -0.01, 0.01]))


def test_balance_experts_sums_the_micro_batches_and_the_ranks_and_starts_over():
    cfg = ModelConfig(**tiny(**MOE, moe_balance="bias", moe_bias_rate=0.5))
    model = zoo.build_model(cfg).train()
    ids = torch.randint(0, cfg.vocab_size, (2, 16))
    model(ids)
    first = [layer.pending.clone() for layer in moe_layers(model)]
    model(ids.flip(1))
    counts = torch.stack([layer.pending for layer in moe_layers(model)])  # (L, E)
    assert counts.sum(dim=-1).tolist() == [2 * 2 * 16 * 2] * len(first)  # two forwards of N·K slots each
    assert not torch.equal(counts, torch.stack(first) * 2)  # the second forward counted apart
    other = torch.arange(8.0).expand_as(counts) * 10  # another rank's loads, heavy on the last experts
    summed = balance_experts(model, lambda t: t + other)
    assert torch.equal(summed, counts + other)
    for layer, row in zip(moe_layers(model), summed):
        assert torch.equal(layer.router.score_bias, 0.5 * torch.sign(row.mean() - row))
        assert layer.pending.abs().sum() == 0
    assert balance_experts(zoo.build_model(ModelConfig(**tiny(**MOE)))) is None  # aux_loss: no bias


def test_the_bias_is_saved_with_the_weights_and_only_under_bias():
    def keys(**kw):
        return {k for k in zoo.build_model(ModelConfig(**tiny(**MOE, **kw))).state_dict() if "score_bias" in k}

    assert keys() == set() and keys(moe_balance="none") == set()
    assert keys(moe_balance="bias") == {f"decoder.layers.{i}.ff.router.score_bias" for i in range(2)}


def _group_limited(scores: torch.Tensor, bias: torch.Tensor, groups: int, top_groups: int, k: int) -> list[set]:
    """DeepSeek-V3's routing, token by token: the groups by the sum of their two best biased
    scores, then the top-k experts of the chosen groups."""
    out = []
    per = scores.shape[1] // groups
    for row in (scores + bias).tolist():
        sums = [sum(sorted(row[g * per : (g + 1) * per])[-2:]) for g in range(groups)]
        kept = sorted(range(groups), key=lambda g: -sums[g])[:top_groups]
        candidates = [e for g in kept for e in range(g * per, (g + 1) * per)]
        out.append(set(sorted(candidates, key=lambda e: -row[e])[:k]))
    return out


@pytest.mark.parametrize("gate", ["sigmoid", "softmax"])
def test_group_limited_top_k_follows_its_definition(gate):
    layer = _layer(moe_balance="bias", moe_gate=gate, moe_groups=4, moe_top_groups=2, moe_top_k=3, moe_scale=2.5)
    layer.router.score_bias.normal_(std=0.2)
    x = torch.randn(32, 16)
    logits, _, weights, experts = layer.route(x)
    scores = logits.sigmoid() if gate == "sigmoid" else logits.softmax(dim=-1)
    assert [set(row) for row in experts.tolist()] == _group_limited(scores, layer.router.score_bias, 4, 2, 3)
    picked = scores.gather(1, experts)
    assert torch.allclose(weights, 2.5 * picked / picked.sum(dim=-1, keepdim=True))
    groups = experts // 2  # (N, K) the group of each pick: at most two groups per token
    assert all(len(set(row)) <= 2 for row in groups.tolist())


def test_the_first_dense_layers_are_dense_and_counted():
    cfg = ModelConfig(**tiny(**MOE, n_layers=4, moe_first_dense=1, moe_every=1, moe_shared=1, moe_d_ff=8))
    assert layer_kinds(cfg, 4) == [FFNKind.dense, FFNKind.moe, FFNKind.moe, FFNKind.moe]
    model = zoo.build_model(cfg)
    assert [type(b.ff) is MoE for b in model.decoder.layers] == [False, True, True, True]
    summary = zoo.summarize(model)
    assert non_embedding_params(cfg) == summary.non_embedding_params
    assert active_non_embedding_params(cfg) == summary.active_non_embedding_params < summary.non_embedding_params
    every = ModelConfig(**tiny(**MOE, n_layers=4, moe_first_dense=1, moe_every=2))
    assert layer_kinds(every, 4) == [FFNKind.dense, FFNKind.moe, FFNKind.dense, FFNKind.moe]


def test_the_sequence_wise_loss_is_deepseek_v3s_equations_17_to_20():
    """L = Σ_i f_i·P_i per sequence, f_i = E/(K·T) · (the tokens that picked i), P_i = the mean
    over its T tokens of the normalised score s'_i; the mean over the batch's sequences."""
    layer = _layer(moe_gate="sigmoid").train()
    x = torch.randn(3, 10, 16)  # (B, T, D)
    layer(x)
    with torch.no_grad():
        _, probs, _, experts = layer.route(x.reshape(-1, 16))
    E, K, T = 8, 2, 10
    expected = 0.0
    for b in range(3):
        rows = range(b * T, (b + 1) * T)
        f = [E / (K * T) * sum(int(i in experts[t].tolist()) for t in rows) for i in range(E)]
        P = [sum(float(probs[t, i]) for t in rows) / T for i in range(E)]
        expected += sum(fi * pi for fi, pi in zip(f, P)) / 3
    assert float(layer.last_losses.sequence) == pytest.approx(expected, rel=1e-5)
    assert float(layer.last_losses.sequence) != pytest.approx(float(layer.last_losses.balance), rel=1e-3)
    layer(x[:1])  # one sequence: the batch's loss
    assert float(layer.last_losses.sequence) == pytest.approx(float(layer.last_losses.balance), rel=1e-5)


@pytest.mark.parametrize(
    "balance,added,sequence", [("aux_loss", True, 0.0), ("bias", False, 0.5), ("none", False, 0.0)]
)
def test_the_task_adds_the_balancing_loss_under_aux_loss_only(balance, added, sequence):
    cfg = ModelConfig(**tiny(**MOE, moe_balance=balance))
    weights = {"moe_balance": 0.01, "moe_router_z": 0.001, "moe_seq_balance": sequence}
    task = TASKS["causal_lm"](model=cfg.to_dict(), task=weights).train()
    batch = {"input_ids": torch.randint(0, cfg.vocab_size, (2, 16))}
    batch["labels"] = batch["input_ids"]
    loss, _, _ = task.training_loss(batch)
    router = task.last_router_losses
    expected = task.last_task_loss + 0.001 * router.z + (0.01 * router.balance if added else 0.0)
    expected = expected + sequence * router.sequence
    assert router.balance > 0 and router.sequence > 0 and torch.allclose(loss.detach(), expected)


@pytest.mark.parametrize(
    "settings,message",
    [
        (dict(moe_balance="bias", moe_top_k=8), "model.moe_balance=bias steers which experts a token picks"),
        (dict(moe_bias_rate=0.01), "model.moe_bias_rate=0.01 is read only under model.moe_balance=bias"),
        (dict(moe_balance="bias", moe_bias_rate=0), "model.moe_bias_rate must be a number > 0"),
        (dict(moe_groups=3), "model.moe_experts (8) must be divisible by model.moe_groups (3)"),
        (dict(moe_groups=8), "leaves 1 expert per group"),
        (dict(moe_groups=2, moe_top_groups=3), "model.moe_top_groups (3) must be <= model.moe_groups (2)"),
        (dict(moe_groups=4, moe_top_groups=1, moe_top_k=3), "model.moe_top_k (3) exceeds the 2 experts"),
        (dict(moe_first_dense=2), "leaves no mixture among model.n_layers=2 layers"),
        (dict(moe_scale=0), "model.moe_scale must be a number > 0"),
        (dict(ffn="dense", moe_groups=2), "model.moe_groups=2 only applies to model.ffn=moe"),
    ],
)
def test_routing_keys_are_refused_on_one_line(settings, message):
    with pytest.raises(ConfigError) as refused:
        ModelConfig(**tiny(**{**MOE, **settings}))
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_a_run_refuses_a_balancing_weight_its_model_does_not_read():
    run = ["model/ffn=moe", "model.bias=false", "model/moe_balance=bias"]
    with pytest.raises(ConfigError, match="task.moe_balance=0.05 is read only under model.moe_balance=aux_loss"):
        validate(zoo.compose([*run, "task.moe_balance=0.05"]))
    assert validate(zoo.compose(run)).model.moe_balance == "bias"
