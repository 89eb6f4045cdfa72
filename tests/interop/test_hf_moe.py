"""Mixture-of-experts parity with transformers: Mixtral, OLMoE and Qwen3-MoE, each built from a
small random config (2 layers, 4 experts, top-2, D 32; no downloads), converted to zoo: the same
logits on a padded batch (float32, <= 1e-4), the same router logits and the same k experts for
every token (transformers' `output_router_logits=True`), the same after the round trip back, the
same greedy tokens with the KV cache; zoo's auxiliary losses against transformers' definitions;
and what cannot be mapped refused on one line."""

from __future__ import annotations

import pytest
import torch
import transformers  # a test dependency: missing, these tests fail rather than skip

import zoo  # noqa: E402
from zoo.interop.hf import UnsupportedConfig, from_hf, to_hf  # noqa: E402
from zoo.models.generate import generate  # noqa: E402
from zoo.nn.moe import MoE, moe_layers  # noqa: E402

V, E, K = 97, 4, 2
SIZES = dict(
    vocab_size=V,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    rms_norm_eps=1e-6,
    initializer_range=0.1,
    num_experts_per_tok=K,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)


def _randomised(model):
    """Norm weights away from 1 (a misplaced norm shows) and routers scaled up (the experts a
    token picks differ clearly between tokens; a fresh router's logits are nearly equal)."""
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if "norm" in name:
                tensor.normal_(0.0, 0.1).add_(1.0)
            elif name.endswith("mlp.gate.weight"):
                tensor.normal_(0.0, 0.5)
    return model.eval()


def _mixtral(**kw):
    config = transformers.MixtralConfig(**{**SIZES, "intermediate_size": 24, "num_local_experts": E, **kw})
    return _randomised(transformers.MixtralForCausalLM(config))


def _olmoe(**kw):
    config = transformers.OlmoeConfig(**{**SIZES, "intermediate_size": 24, "num_experts": E, **kw})
    return _randomised(transformers.OlmoeForCausalLM(config))


def _qwen3_moe(**kw):
    config = transformers.Qwen3MoeConfig(
        **{**SIZES, "intermediate_size": 72, "moe_intermediate_size": 24, "num_experts": E, "head_dim": 8, **kw}
    )
    return _randomised(transformers.Qwen3MoeForCausalLM(config))


FAMILIES = {
    "mixtral": _mixtral,
    "mixtral-sliding-tied": lambda: _mixtral(sliding_window=4, tie_word_embeddings=True),
    "olmoe": _olmoe,  # norm_topk_prob false: the k weights as the softmax gives them
    "olmoe-renormalised": lambda: _olmoe(norm_topk_prob=True),
    "qwen3_moe": lambda: _qwen3_moe(norm_topk_prob=True),
    "qwen3_moe-dense-first": lambda: _qwen3_moe(decoder_sparse_step=2),  # layer 0 dense, layer 1 a mixture
}


def _batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, V, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0  # right padding
    mask[2, 5:] = 0
    return ids, mask


def _routing(routers):
    """Record each router's output of the next forward: {layer: (logits (N, E), top-k weights
    (N, K), experts (N, K))}, for zoo's `Router` (logits, probabilities, weights, experts) and
    transformers' top-k routers (logits, weights, experts) alike."""
    seen = {}
    for i, router in enumerate(routers):
        router.register_forward_hook(
            lambda module, args, out, i=i: seen.__setitem__(i, tuple(t.detach() for t in (out[0], out[-2], out[-1])))
        )
    return seen


def _hf_routers(hf_model):
    return [layer.mlp.gate for layer in hf_model.model.layers if hasattr(layer.mlp, "experts")]


@pytest.fixture(params=sorted(FAMILIES))
def hf_model(request):
    torch.manual_seed(0)
    return FAMILIES[request.param]()


def test_logits_and_expert_choices_match(hf_model):
    ids, mask = _batch()
    model = from_hf(hf_model)
    assert isinstance(model.decoder.layers[-1].ff, MoE)
    ours, theirs = _routing(r.router for r in moe_layers(model)), _routing(_hf_routers(hf_model))
    with torch.no_grad():
        expected = hf_model(input_ids=ids, attention_mask=mask, output_router_logits=True)
        got = model(ids, attention_mask=mask).logits
    keep = mask.bool()
    assert float((got[keep] - expected.logits[keep]).abs().max()) <= 1e-4
    assert len(expected.router_logits) == len(theirs) == len(ours) >= 1  # one per mixture layer
    real = keep.reshape(-1)  # (N,) the tokens that are not padding
    chosen = set()
    for i, router_logits in enumerate(expected.router_logits):
        (logits, weights, experts), (_, hf_weights, hf_experts) = ours[i], theirs[i]
        assert float((logits[real] - router_logits[real]).abs().max()) <= 1e-4
        assert torch.equal(experts[real], hf_experts[real])  # the same k experts, in the same order
        assert float((weights[real] - hf_weights[real]).abs().max()) <= 1e-5  # renormalised or not alike
        chosen.update(experts[real].flatten().tolist())
    assert chosen == set(range(E))  # every expert takes some token: each one's weights are compared


def test_round_trip_back_to_transformers(hf_model):
    ids, mask = _batch()
    back = to_hf(from_hf(hf_model))
    assert type(back) is type(hf_model)
    keep = mask.bool()
    with torch.no_grad():
        diff = back(input_ids=ids, attention_mask=mask).logits - hf_model(input_ids=ids, attention_mask=mask).logits
    assert float(diff[keep].abs().max()) <= 1e-4


@pytest.mark.parametrize("name", ["mixtral", "olmoe", "qwen3_moe-dense-first"])
def test_greedy_generation_gives_the_same_tokens(name):
    torch.manual_seed(0)
    hf_model = FAMILIES[name]()
    model = from_hf(hf_model)
    prompt = torch.randint(3, V, (1, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        theirs = hf_model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=12,
            do_sample=False,
            num_beams=1,
            eos_token_id=None,
            pad_token_id=0,
        )
        ours = generate(model, prompt, max_new_tokens=12, eos_id=None)
    assert ours.tolist() == theirs[:, prompt.shape[1] :].tolist()


def test_a_sliding_window_binds_on_these_sequences():
    """The Mixtral window of 4 keys changes the logits of a 12-token batch (the parity above
    would not see a window dropped on both sides otherwise)."""
    torch.manual_seed(0)
    sliding = FAMILIES["mixtral-sliding-tied"]()
    assert from_hf(sliding).config.window == 4
    full = transformers.MixtralForCausalLM(
        transformers.MixtralConfig(**{**sliding.config.to_dict(), "sliding_window": None})
    ).eval()
    full.load_state_dict(sliding.state_dict())
    ids, _ = _batch()
    with torch.no_grad():
        assert float((full(input_ids=ids).logits - sliding(input_ids=ids).logits).abs().max()) > 1e-3


def test_the_auxiliary_losses_are_transformers_definitions():
    """zoo's load-balancing loss of a layer is transformers' (Switch, Mixtral's
    `load_balancing_loss_func` over that layer's router logits) divided by k: transformers counts
    f_i over the tokens (summing to k), zoo over the routed slots (summing to 1). zoo's router
    z-loss is Switch Transformers' `router_z_loss_func`."""
    from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func
    from transformers.models.switch_transformers.modeling_switch_transformers import router_z_loss_func

    torch.manual_seed(0)
    hf_model = FAMILIES["mixtral"]()
    model = from_hf(hf_model).train()  # dropout 0: training mode records the losses, computes the same
    ids, _ = _batch()
    with torch.no_grad():
        theirs = hf_model(input_ids=ids, output_router_logits=True).router_logits
        model(ids)
    layers = moe_layers(model)
    assert len(layers) == len(theirs) == 2
    for layer, logits in zip(layers, theirs):
        balance = load_balancing_loss_func((logits,), E, K)
        z = router_z_loss_func(logits.reshape(3, 12, E))
        assert abs(float(layer.last_losses.balance) * K - float(balance)) <= 1e-5
        assert abs(float(layer.last_losses.z) - float(z)) <= 1e-5
        assert float(balance) > K * 1.0001  # routing not exactly uniform: a wrong factor shows


@pytest.mark.parametrize(
    "build, field",
    [
        (lambda: _olmoe(clip_qkv=1.0), "clip_qkv=1.0"),
        (lambda: _qwen3_moe(mlp_only_layers=[0]), "mlp_only_layers=[0]"),
        (lambda: _qwen3_moe(use_sliding_window=True, sliding_window=4), "use_sliding_window=True"),
        (lambda: _mixtral(hidden_act="gelu"), "hidden_act='gelu'"),
    ],
)
def test_an_unsupported_config_names_the_field(build, field):
    with pytest.raises(UnsupportedConfig, match=field.replace("[", r"\[").replace("(", r"\(")):
        from_hf(build())


SMALL = [
    "model.d_model=32",
    "model.n_heads=4",
    "model.n_layers=2",
    "model.vocab_size=97",
    "model.dropout=0.0",
    "model.moe_experts=4",
    "model.moe_top_k=2",
]


@pytest.mark.parametrize(
    "overrides, family",
    [
        (["model=mixtral"], "MixtralForCausalLM"),
        (["model=olmoe"], "OlmoeForCausalLM"),
        (["model=qwen3", "model.ffn=moe", "model.moe_every=2", "model.moe_d_ff=16"], "Qwen3MoeForCausalLM"),
        (["model=mixtral", "model.moe_d_ff=16"], "MixtralForCausalLM"),
        (["model=mixtral", "model.qk_norm=projection"], "OlmoeForCausalLM"),  # OLMoE renormalising
    ],
)
def test_a_composed_mixture_exports_as_its_family(overrides, family):
    torch.manual_seed(0)
    model = zoo.build_model(zoo.compose([*overrides, *SMALL]).model).eval()
    hf = to_hf(model)
    assert type(hf).__name__ == family
    ids, mask = _batch()
    keep = mask.bool()
    with torch.no_grad():
        diff = hf(input_ids=ids, attention_mask=mask).logits - model(ids, attention_mask=mask).logits
    assert float(diff[keep].abs().max()) <= 1e-4


@pytest.mark.parametrize(
    "overrides",
    [
        ["model=mixtral", "model.moe_renorm=false"],  # Mixtral always renormalises
        ["model=mixtral", "model.moe_every=2"],  # Mixtral has no dense layers
        ["model=mixtral", "model.moe_capacity=1.25"],  # transformers' experts drop no token
        ["model=mixtral", "model.moe_shared=1"],
        ["model=mixtral", "model.moe_gate=sigmoid"],
        ["model=olmoe", "model.moe_every=2"],
        ["model=olmoe", "model.head_dim=16"],  # H·Dh = 64 > D: transformers sizes OLMoE's QK-norm by D
    ],
)
def test_a_mixture_no_family_has_is_refused(overrides):
    model = zoo.build_model(zoo.compose([*overrides, *SMALL]).model)
    with pytest.raises(UnsupportedConfig, match="matches no supported"):
        to_hf(model)


@pytest.mark.parametrize("name", ["mixtral", "olmoe", "qwen3_moe-dense-first"])
def test_a_saved_directory_loads_for_init_from(name, tmp_path):
    """`init_from=hf:DIR` reads what `save_pretrained` writes (transformers may save the experts
    in another layout and convert them back on loading): the model of `model_config(DIR)`, with
    the logits of the model saved."""
    from zoo.interop.hf.pretrained import load_pretrained, model_config

    torch.manual_seed(0)
    hf_model = FAMILIES[name]()
    hf_model.save_pretrained(tmp_path)
    model, _ = load_pretrained(tmp_path)
    assert model.config == model_config(tmp_path)
    ids, _ = _batch()
    with torch.no_grad():
        assert float((model(ids).logits - hf_model(input_ids=ids).logits).abs().max()) <= 1e-4
