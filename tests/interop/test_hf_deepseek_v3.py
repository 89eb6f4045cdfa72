"""DeepSeek-V3 parity with transformers, the whole model: `DeepseekV3ForCausalLM` built from a
small random config (3 layers, the first dense; 8 routed experts in 4 groups, each token's top 2
from its 2 best groups; 1 shared expert; D 32; float32; no downloads), queries through one
projection or through their own latent (q_lora_rank), converted to zoo: the same logits on a
padded batch (<= 1e-4), the same experts and weights for every token with the score-correction
bias carried as the router's selection bias (and changing choices), the same greedy tokens with
the KV cache; exported back, the directory `save_pretrained` writes loads with `from_pretrained`
(and with zoo's `init_from=hf:DIR`) and gives the same logits; the `deepseek_v3` preset exports
as DeepSeek-V3; what transformers' model cannot hold is refused on one line."""

from __future__ import annotations

import pytest
import torch
import transformers  # a test dependency: missing, these tests fail rather than skip

import zoo  # noqa: E402
from zoo.interop.hf import UnsupportedConfig, from_hf, to_hf  # noqa: E402
from zoo.models.generate import generate  # noqa: E402
from zoo.nn.moe import MoE, moe_layers  # noqa: E402

V, E, K = 97, 8, 2
SIZES = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=48,
    moe_intermediate_size=8,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=4,
    kv_lora_rank=12,
    qk_nope_head_dim=8,
    qk_rope_head_dim=4,
    v_head_dim=6,
    first_k_dense_replace=1,
    n_routed_experts=E,
    n_group=4,
    topk_group=2,
    num_experts_per_tok=K,
    n_shared_experts=1,
    routed_scaling_factor=2.5,
    max_position_embeddings=64,
    rms_norm_eps=1e-6,
    initializer_range=0.1,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)


def _randomised(model):
    """Norm weights away from 1 (a misplaced norm shows), routers scaled up (a fresh router's
    scores are nearly equal) and correction biases large enough to change choices."""
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if "norm" in name:
                tensor.normal_(0.0, 0.1).add_(1.0)
            elif name.endswith("mlp.gate.weight"):
                tensor.normal_(0.0, 0.5)
            elif name.endswith("e_score_correction_bias"):
                tensor.normal_(0.0, 0.1)
    return model.eval()


def _deepseek_v3(**kw):
    return _randomised(transformers.DeepseekV3ForCausalLM(transformers.DeepseekV3Config(**{**SIZES, **kw})))


FAMILIES = {
    "q-projection": _deepseek_v3,  # queries through one projection (q_lora_rank None)
    "q-lora": lambda: _deepseek_v3(q_lora_rank=10),
    # DeepSeek-V2's routing shape: weights not renormalised, 2 groups (top 1), 2 shared experts, tied
    "v2-like-tied": lambda: _deepseek_v3(
        norm_topk_prob=False, n_group=2, topk_group=1, n_shared_experts=2, tie_word_embeddings=True
    ),
}


def _batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, V, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0  # right padding
    mask[2, 5:] = 0
    return ids, mask


def _routing(routers):
    """Record each router's top-k weights (N, K) and experts (N, K) of the next forward, for
    zoo's `Router` (logits, probabilities, weights, experts) and transformers' (logits, weights,
    experts) alike."""
    seen = {}
    for i, router in enumerate(routers):
        router.register_forward_hook(
            lambda module, args, out, i=i: seen.__setitem__(i, tuple(t.detach() for t in out[-2:]))
        )
    return seen


def _hf_routers(hf_model):
    return [layer.mlp.gate for layer in hf_model.model.layers if hasattr(layer.mlp, "experts")]


def _logits(model, ids, mask, hf: bool):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits if hf else model(ids, attention_mask=mask).logits


def _max_diff(a, b, mask):
    keep = mask.bool()
    return float((a[keep] - b[keep]).abs().max())


@pytest.fixture(params=sorted(FAMILIES))
def hf_model(request):
    torch.manual_seed(0)
    return FAMILIES[request.param]()


def test_logits_and_expert_choices_match(hf_model):
    ids, mask = _batch()
    model = from_hf(hf_model)
    cfg = model.config
    assert (cfg.kv.value, cfg.ffn.value, cfg.moe_balance.value, cfg.moe_first_dense) == ("latent", "moe", "bias", 1)
    assert not isinstance(model.decoder.layers[0].ff, MoE) and all(
        isinstance(layer.ff, MoE) for layer in model.decoder.layers[1:]
    )
    for ours, theirs in zip(moe_layers(model), _hf_routers(hf_model)):  # the correction bias as the selection bias
        assert torch.equal(ours.router.score_bias, theirs.e_score_correction_bias)
    seen, hf_seen = _routing(r.router for r in moe_layers(model)), _routing(_hf_routers(hf_model))
    assert _max_diff(_logits(model, ids, mask, hf=False), _logits(hf_model, ids, mask, hf=True), mask) <= 1e-4
    real = mask.bool().reshape(-1)  # (N,) the tokens that are not padding
    assert len(seen) == len(hf_seen) == 2
    for i in seen:
        (weights, experts), (hf_weights, hf_experts) = seen[i], hf_seen[i]
        order, hf_order = experts.argsort(dim=-1), hf_experts.argsort(dim=-1)  # the same k experts, in any order
        assert torch.equal(experts.gather(1, order)[real], hf_experts.gather(1, hf_order)[real])
        assert float((weights.gather(1, order) - hf_weights.gather(1, hf_order))[real].abs().max()) <= 1e-5


def test_the_correction_bias_changes_the_choices_it_is_compared_on():
    """Without its bias the same model picks other experts for some token (the parity above would
    not see a bias dropped on both sides otherwise), and its logits move."""
    torch.manual_seed(0)
    hf_model = FAMILIES["q-projection"]()
    model = from_hf(hf_model)
    ids, mask = _batch()
    seen = _routing(r.router for r in moe_layers(model))
    before = _logits(model, ids, mask, hf=False)
    chosen = {i: experts.sort(-1).values for i, (_, experts) in seen.items()}
    for layer in moe_layers(model):
        layer.router.score_bias.zero_()
    after = _logits(model, ids, mask, hf=False)
    assert any(not torch.equal(chosen[i], seen[i][1].sort(-1).values) for i in seen)
    assert _max_diff(before, after, mask) > 1e-3


def test_round_trip_back_through_save_and_from_pretrained(hf_model, tmp_path):
    ids, mask = _batch()
    back = to_hf(from_hf(hf_model))
    assert type(back) is transformers.DeepseekV3ForCausalLM
    back.save_pretrained(tmp_path)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    expected = _logits(hf_model, ids, mask, hf=True)
    assert _max_diff(_logits(back, ids, mask, hf=True), expected, mask) <= 1e-4
    assert _max_diff(_logits(loaded, ids, mask, hf=True), expected, mask) <= 1e-4


@pytest.mark.parametrize("name", ["q-projection", "q-lora"])
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


def test_a_saved_directory_loads_for_init_from(tmp_path):
    """`init_from=hf:DIR` reads what `save_pretrained` writes: the model of `model_config(DIR)`,
    with the logits of the model saved."""
    from zoo.interop.hf.pretrained import load_pretrained, model_config

    torch.manual_seed(0)
    hf_model = FAMILIES["q-lora"]()
    hf_model.save_pretrained(tmp_path)
    model, _ = load_pretrained(tmp_path)
    assert model.config == model_config(tmp_path)
    ids, mask = _batch()
    assert _max_diff(_logits(model, ids, mask, hf=False), _logits(hf_model, ids, mask, hf=True), mask) <= 1e-4


SMALL = ["model.d_model=32", "model.n_heads=4", "model.n_layers=3", "model.vocab_size=97", "model.dropout=0.0"]


@pytest.mark.parametrize(
    "overrides",
    [
        ["model=deepseek_v3"],
        ["model=deepseek_v3", "model.q_lora_rank=null", "model.moe_d_ff=8", "model.moe_renorm=false"],
        # balanced without a selection bias: exported with a zero correction bias, the same choices
        ["model=deepseek_v3", "model.moe_balance=aux_loss"],
        ["model=deepseek_v3", "model.moe_balance=none", "model.moe_groups=1", "model.moe_top_groups=1"],
    ],
)
def test_a_composed_deepseek_v3_exports_and_loads_with_from_pretrained(overrides, tmp_path):
    """A model composed in zoo (its own random weights and biases), exported: transformers'
    model and the directory it saves compute zoo's logits."""
    torch.manual_seed(0)
    model = zoo.build_model(zoo.compose([*overrides, *SMALL]).model).eval()
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if "norm" in name:
                tensor.normal_(0.0, 0.1).add_(1.0)
            elif name.endswith("router.weight"):
                tensor.normal_(0.0, 0.5)
            elif name.endswith("score_bias"):
                tensor.normal_(0.0, 0.1)
    hf = to_hf(model)
    assert type(hf).__name__ == "DeepseekV3ForCausalLM"
    hf.save_pretrained(tmp_path)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    ids, mask = _batch()
    expected = _logits(model, ids, mask, hf=False)
    assert _max_diff(_logits(hf, ids, mask, hf=True), expected, mask) <= 1e-4
    assert _max_diff(_logits(loaded, ids, mask, hf=True), expected, mask) <= 1e-4


@pytest.mark.parametrize(
    "overrides",
    [
        ["model=deepseek_v3", "model.moe_gate=softmax"],  # DeepSeek-V3's router is a sigmoid per expert
        ["model=deepseek_v3", "model.moe_shared=0"],  # transformers' mixture always has its shared unit
        ["model=deepseek_v3", "model.moe_every=2"],  # no dense layers between mixtures
        ["model=deepseek_v3", "model.moe_capacity=1.25"],  # transformers' experts drop no token
        ["model=deepseek_v3", "model.norm_eps=1e-5"],  # the latent norms keep 1e-6
    ],
)
def test_a_composition_deepseek_v3_cannot_hold_is_refused(overrides):
    model = zoo.build_model(zoo.compose([*overrides, *SMALL]).model)
    with pytest.raises(UnsupportedConfig, match="matches no supported"):
        to_hf(model)


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"n_shared_experts": 0}, "n_shared_experts=0"),
        ({"hidden_act": "gelu"}, "hidden_act='gelu'"),
        ({"rope_interleave": False}, "rope_interleave=False"),
    ],
)
def test_an_unsupported_config_names_the_field(kw, field):
    with pytest.raises(UnsupportedConfig, match=field):
        from_hf(_deepseek_v3(**kw))
