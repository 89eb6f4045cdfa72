"""The mixture-of-experts layer (`model.ffn=moe`, `zoo.nn.moe`): one layer gives the output and
expert choices of transformers' Mixtral block with the same weights (the layout is a rename);
the sorted dispatch equals a token-by-token sum under every gate, renormalisation, shared
experts and a capacity that drops tokens; the router losses and routing statistics have the
values their definitions give at uniform and collapsed routing; the layers every k-th; the
one-line refusals; position schemes and norm placements; KV-cached decoding; the training loss
with its router terms, logged apart."""

from __future__ import annotations

import math

import pytest
import torch

import zoo
from tests.conftest import NORMS, POSITIONS, tiny
from zoo.config import ConfigError, ModelConfig
from zoo.config.schema.params import active_non_embedding_params, non_embedding_params
from zoo.nn.feedforward import FeedForward
from zoo.nn.moe import MoE, moe_layers, router_losses

MOE = dict(ffn="moe", moe_experts=4, moe_top_k=2, bias=False)


def _layer(**overrides) -> tuple[MoE, ModelConfig]:
    cfg = ModelConfig(**tiny(**{**MOE, "d_ff": 24, **overrides}))
    layer = zoo.build_model(cfg).decoder.layers[-1].ff
    for p in layer.parameters():  # wide weights: routing far from ties
        torch.nn.init.normal_(p, std=0.5)
    return layer, cfg


def _by_token(layer: MoE, x: torch.Tensor) -> torch.Tensor:
    """The definition, one token at a time: Σ over its top-k experts e of w_e · FFN_e(x), slots
    past an expert's capacity (first come, in token then slot order) dropped; plus the shared."""
    x = x.reshape(-1, x.shape[-1])  # (N, D)
    _, _, weights, experts = layer.route(x)
    capacity = layer.capacity(x.shape[0])
    taken = [0] * layer.n_experts
    out = torch.zeros_like(x)
    for n in range(x.shape[0]):
        for w, e in zip(weights[n].tolist(), experts[n].tolist()):
            taken[e] += 1
            if capacity is not None and taken[e] > capacity:
                continue
            h = layer.experts.hidden(layer.experts.w_in[e] @ x[n])  # (F,)
            out[n] += w * (layer.experts.w_out[e] @ h)
    return out + (layer.shared(x) if layer.shared is not None else 0)


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"moe_gate": "sigmoid", "moe_renorm": False},
        {"moe_renorm": False, "moe_shared": 2, "moe_d_ff": 8, "activation": "swiglu"},
        {"moe_capacity": 0.5, "moe_top_k": 1},
        {"moe_capacity": 1.0, "moe_gate": "sigmoid"},
    ],
    ids=["softmax", "sigmoid-raw", "shared-fine-gated", "capacity-top1", "capacity-sigmoid"],
)
def test_the_sorted_dispatch_is_the_token_by_token_sum(settings):
    layer, _ = _layer(**settings)
    x = torch.randn(3, 7, 16)
    layer.train()
    y = layer(x)
    torch.testing.assert_close(y.reshape(-1, 16), _by_token(layer, x), rtol=1e-5, atol=1e-5)
    if layer.capacity_factor == 0.5:  # 21 tokens, capacity ceil(0.5·21/4) = 3 slots an expert
        assert float(layer.dropped) >= 1 - 4 * 3 / 21 - 1e-6


def test_one_layer_is_mixtrals_block_with_the_same_weights_and_choices():
    from transformers import MixtralConfig
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    layer, cfg = _layer(activation="swiglu", moe_d_ff=12)
    hf = MixtralSparseMoeBlock(
        MixtralConfig(
            hidden_size=16, intermediate_size=12, num_local_experts=4, num_experts_per_tok=2, hidden_act="silu"
        )
    ).eval()
    hf.gate.weight.data.copy_(layer.router.weight)
    hf.experts.gate_up_proj.data.copy_(layer.experts.w_in)  # (E, 2·F, D): gate rows, then up rows
    hf.experts.down_proj.data.copy_(layer.experts.w_out)  # (E, D, F)
    x = torch.randn(2, 9, 16)
    with torch.no_grad():
        theirs = hf(x)
        theirs = theirs[0] if isinstance(theirs, tuple) else theirs
        _, _, their_choice = hf.gate(x)
        torch.testing.assert_close(layer.eval()(x), theirs, rtol=1e-4, atol=1e-5)
        assert torch.equal(layer.route(x.reshape(-1, 16))[3], their_choice)


def test_uniform_routing_gives_balance_1_and_z_log_e_squared_and_collapse_gives_e():
    layer, _ = _layer()
    layer.train()
    torch.nn.init.zeros_(layer.router.weight)  # every logit 0: P_i = 1/E whatever the ties pick
    layer(torch.randn(2, 8, 16))
    losses = layer.last_losses
    assert float(losses.balance.detach()) == pytest.approx(1.0)
    assert float(losses.z.detach()) == pytest.approx(math.log(4) ** 2)
    assert float(layer.entropy) == pytest.approx(math.log(4))
    assert float(layer.load.sum()) == pytest.approx(1.0) and float(layer.dropped) == 0.0
    with torch.no_grad():  # every token prefers expert 0 (then 1): Switch's worst case
        layer.router.weight.zero_()
        layer.router.weight[0, 0], layer.router.weight[1, 0] = 60.0, 30.0
    x = torch.randn(2, 8, 16)
    x[..., 0] = x[..., 0].abs() + 1
    layer(x)
    assert layer.load.tolist() == [0.5, 0.5, 0.0, 0.0]
    assert float(layer.last_losses.balance.detach()) == pytest.approx(4 * 0.5, rel=1e-3)  # E·f_0·P_0, P_0 ≈ 1
    assert float(layer.entropy) < 1e-3


@pytest.mark.parametrize(
    "family,kind", [("decoder_only", "causal_lm"), ("encoder_only", "masked_lm"), ("encoder_decoder", "seq2seq")]
)
def test_the_task_adds_the_router_losses_and_logs_them_apart(family, kind):
    from zoo.tasks import TASKS

    torch.manual_seed(0)
    task = TASKS[kind](
        model=tiny(family, **MOE, n_layers=3, moe_every=2),
        task={"kind": kind, "moe_balance": 0.5, "moe_router_z": 0.25},
    )
    ids = torch.randint(4, 37, (2, 12))
    batch = {"input_ids": ids, "labels": ids}
    if kind == "seq2seq":
        batch["decoder_input_ids"] = ids.flip(1)
    task.train()
    loss = task.training_loss(batch)[0]
    b, z, _ = task.last_router_losses
    layers = moe_layers(task.model)
    assert len(layers) == (2 if kind == "seq2seq" else 1) and float(b) > 0 and float(z) > 0
    torch.testing.assert_close(loss.detach(), task.last_task_loss + 0.5 * b + 0.25 * z)
    loss.backward()
    assert all(layer.router.weight.grad.abs().sum() > 0 for layer in layers)
    assert router_losses(task.model) is None  # handed out once
    task.eval()
    with torch.no_grad():
        task.model(**({"input_ids": ids, "decoder_input_ids": ids} if kind == "seq2seq" else {"input_ids": ids}))
    assert router_losses(task.model) is None  # validation forwards keep none


def test_every_kth_layer_is_a_mixture_and_the_counts_follow():
    cfg = ModelConfig(**tiny(**MOE, n_layers=4, moe_every=2))
    model = zoo.build_model(cfg)
    kinds = [type(layer.ff) for layer in model.decoder.layers]
    assert kinds == [FeedForward, MoE, FeedForward, MoE]
    assert non_embedding_params(cfg) == zoo.summarize(model).non_embedding_params
    summary = zoo.summarize(model)
    # each mixture layer: E - k = 2 experts a token skips
    skipped = 2 * 2 * (2 * 16 * cfg.d_ff)
    assert summary.non_embedding_params - summary.active_non_embedding_params == skipped
    assert summary.total_params - summary.active_params == skipped
    assert active_non_embedding_params(cfg) == summary.active_non_embedding_params
    dense = ModelConfig(**tiny(bias=False))
    assert active_non_embedding_params(dense) == non_embedding_params(dense)


@pytest.mark.parametrize("counts", ["total", "active"])
def test_the_budget_sizes_d_ff_by_total_or_active_parameters(counts):
    budget = 60_000
    cfg = ModelConfig(**tiny(**MOE, param_budget=budget, param_budget_counts=counts))
    count = non_embedding_params(cfg) if counts == "total" else active_non_embedding_params(cfg)
    step = non_embedding_params(
        ModelConfig(**{**cfg.to_dict(), "param_budget": None, "d_ff": cfg.d_ff + 1})
    ) - non_embedding_params(cfg)
    assert abs(count - budget) <= step  # the nearest d_ff
    assert zoo.summarize(zoo.build_model(cfg)).non_embedding_params == non_embedding_params(cfg)


@pytest.mark.parametrize(
    "overrides,says",
    [
        ({"bias": True}, "model.bias=false"),
        ({"parametrization": "mup"}, "model.parametrization=mup"),
        ({"moe_top_k": 5}, "model.moe_top_k (5) must be <= model.moe_experts (4)"),
        ({"moe_gate": "relu"}, "model.moe_gate='relu' is not allowed"),
        ({"moe_capacity": 0}, "model.moe_capacity must be a number > 0"),
        ({"moe_every": 3}, "model.moe_every=3 exceeds model.n_layers=2"),
        ({"moe_shared": -1}, "model.moe_shared must be an integer >= 0"),
        ({"moe_d_ff": 8, "param_budget": 50_000}, "cannot size d_ff"),
        ({"ffn": "dense", "moe_experts": 16}, "model.moe_experts=16 only applies to model.ffn=moe"),
    ],
)
def test_what_a_mixture_cannot_be_is_refused_on_one_line(overrides, says):
    with pytest.raises(ConfigError) as refused:
        ModelConfig(**tiny(**{**MOE, **overrides}))
    assert "\n" not in str(refused.value) and says in str(refused.value)


# each position scheme once and each placement in turn (a scheme meets a placement in
# tests/models/test_variants.py's design; a mixture meets every pair in the contract's)
@pytest.mark.parametrize("position, norm", [(p, NORMS[k % len(NORMS)]) for k, p in enumerate(POSITIONS)])
def test_a_mixture_trains_with_every_position_scheme_and_norm_placement(position, norm):
    cfg = ModelConfig(**tiny("decoder_only", position, **MOE, norm=norm, n_layers=1))
    model = zoo.build_model(cfg).train()
    logits = model(torch.randint(0, 37, (2, 8))).logits
    logits.square().mean().backward()
    assert torch.isfinite(logits).all()
    assert model.decoder.layers[0].ff.experts.w_in.grad.abs().sum() > 0


def test_the_expert_loop_trains_under_bf16_autocast_on_the_cpu():
    """The loop's experts give bf16 under autocast; their weighted sum joins the float32 stream."""
    cfg = ModelConfig(**tiny("decoder_only", "rope", **MOE, n_layers=1))
    model = zoo.build_model(cfg).train()
    ids = torch.randint(0, 37, (2, 8))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(ids).logits
    ref = model(ids).logits
    logits.float().square().mean().backward()
    assert torch.isfinite(logits).all()
    assert (logits.float() - ref).abs().max() < 0.05 * ref.abs().max()
    assert model.decoder.layers[0].ff.experts.w_in.grad.abs().sum() > 0


@pytest.mark.parametrize("family", ["decoder_only", "encoder_decoder"])
def test_cached_decoding_gives_the_uncached_logits(family):
    torch.manual_seed(0)
    model = zoo.build_model(tiny(family, "rope", **MOE, init_std=0.5)).eval()
    prompt, tokens = torch.randint(4, 37, (2, 5)), torch.randint(4, 37, (2, 4))
    cache = model.new_cache()
    with torch.no_grad():
        if family == "encoder_decoder":
            memory = model.encode(prompt)

            def run(ids, **kw):
                return model(decoder_input_ids=ids, encoder_hidden_states=memory, **kw).logits
        else:

            def run(ids, **kw):
                return model(ids, **kw).logits

        first = prompt
        steps = [run(first, cache=cache, use_cache=True)[:, -1:]]
        steps += [run(tokens[:, i : i + 1], cache=cache, use_cache=True) for i in range(tokens.shape[1] - 1)]
        whole = run(torch.cat([first, tokens[:, :-1]], dim=1))[:, first.shape[1] - 1 :]
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, rtol=1e-4, atol=1e-5)


def test_expert_matrices_are_decayed_like_linear_weights():
    from zoo.tasks.optim import parameter_groups

    model = zoo.build_model(tiny(**MOE))
    decayed = {id(p) for p in parameter_groups(model, 0.1)[0]["params"]}
    experts = model.decoder.layers[0].ff.experts
    assert id(experts.w_in) in decayed and id(experts.w_out) in decayed


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the grouped GEMM runs there)")
@pytest.mark.parametrize("capacity", [None, 0.5])
def test_the_grouped_gemm_gives_the_loop_over_experts(capacity):
    layer, _ = _layer(activation="swiglu", moe_d_ff=32, moe_capacity=capacity, d_model=64)
    layer = layer.cuda().to(torch.bfloat16)
    x = torch.randn(4, 64, 64, device="cuda", dtype=torch.bfloat16)
    out = {}
    for dispatch in ("loop", "grouped"):
        layer.dispatch = dispatch
        layer.zero_grad()
        y = layer(x)
        y.float().square().mean().backward()
        out[dispatch] = (y.float(), layer.experts.w_in.grad.float().clone())
    torch.testing.assert_close(out["grouped"][0], out["loop"][0], rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(out["grouped"][1], out["loop"][1], rtol=5e-2, atol=5e-2)


@pytest.mark.slow
def test_a_compiled_training_step_gives_the_eager_loss_router_losses_and_gradients():
    """task.compile=true with mixture layers (the CPU's loop over experts: graph breaks where it
    reads the row counts, docs/composing.md): the same loss, router losses and gradients."""
    from zoo.tasks import TASKS

    ids = torch.randint(4, 37, (2, 12))
    out = {}
    for compile in (False, True):
        torch.manual_seed(0)
        task = TASKS["causal_lm"](model=tiny(**MOE), task={"kind": "causal_lm", "compile": compile})
        task.train()
        loss = task.training_loss({"input_ids": ids, "labels": ids})[0]
        loss.backward()
        out[compile] = (loss.detach(), task.last_router_losses, [p.grad for p in task.model.parameters()])
    torch.testing.assert_close(out[True][0], out[False][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(tuple(out[True][1]), tuple(out[False][1]), rtol=1e-5, atol=1e-6)
    for compiled, eager in zip(out[True][2], out[False][2], strict=True):
        torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-6)


def test_a_capacity_drops_in_training_only():
    """Evaluation and cached decoding are dropless: a one-token step would otherwise drop what the
    whole sequence's forward keeps."""
    layer, _ = _layer(moe_capacity=0.25, moe_top_k=1)
    x = torch.randn(2, 8, 16)
    with torch.no_grad():
        dropped_in_training = layer.train()(x)
        evaluated = layer.eval()(x)
    assert float(layer.dropped) > 0  # from the training forward
    assert not torch.allclose(dropped_in_training, evaluated)
    layer.capacity_factor = None
    torch.testing.assert_close(layer.eval()(x), evaluated, rtol=0, atol=0)
