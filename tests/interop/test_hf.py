"""Hugging Face parity: each supported family is built in `transformers` from a small random
config (no downloads), converted, and must give the same logits on a padded batch (≤ 1e-4,
float32), the same after the round trip zoo -> HF, and the same greedy tokens with the KV
cache as `transformers`' own `generate`."""

from __future__ import annotations

import functools

import pytest
import torch
import transformers  # a test dependency: missing, these tests fail rather than skip

import zoo  # noqa: E402
from zoo.interop.hf import UnsupportedConfig, from_hf, to_hf  # noqa: E402
from zoo.models.generate import generate  # noqa: E402

V = 97


def _llama(tie: bool = False, positions: int = 64, **kw):
    config = transformers.LlamaConfig(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=72,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=positions,
        rms_norm_eps=1e-6,
        tie_word_embeddings=tie,
        initializer_range=0.1,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        **kw,
    )
    return transformers.LlamaForCausalLM(config).eval()


def _gpt2(activation: str = "gelu_new", **kw):
    config = transformers.GPT2Config(
        vocab_size=V,
        n_positions=64,
        n_embd=32,
        n_layer=2,
        n_head=4,
        activation_function=activation,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        initializer_range=0.1,
        bos_token_id=None,
        eos_token_id=None,
        **kw,
    )
    return transformers.GPT2LMHeadModel(config).eval()


def _bert(activation: str = "gelu", **kw):
    config = transformers.BertConfig(
        vocab_size=V,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_act=activation,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        initializer_range=0.1,
        **kw,
    )
    return _random_biases(transformers.BertForMaskedLM(config).eval())


def _t5(proj: str = "relu", tie: bool = True, decoder_layers: int = 2, **kw):
    config = transformers.T5Config(
        vocab_size=V,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=decoder_layers,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=20,
        feed_forward_proj=proj,
        dropout_rate=0.0,
        tie_word_embeddings=tie,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
        **kw,
    )
    model = transformers.T5ForConditionalGeneration(config).eval()
    if not tie:  # a real v1.1 checkpoint has its own output projection; a fresh model ties anyway
        model.lm_head.weight = torch.nn.Parameter(torch.randn(V, 32))
    return model


def _bart(**kw):
    config = transformers.BartConfig(
        **{
            "vocab_size": V,
            "d_model": 32,
            "encoder_layers": 2,
            "decoder_layers": 3,
            "encoder_attention_heads": 4,
            "decoder_attention_heads": 4,
            "encoder_ffn_dim": 64,
            "decoder_ffn_dim": 64,
            "max_position_embeddings": 64,
            "dropout": 0.0,
            "attention_dropout": 0.0,
            "init_std": 0.1,
            "forced_eos_token_id": None,
            **kw,
        }
    )
    return _random_biases(transformers.BartForConditionalGeneration(config).eval())


def _qwen3(tie: bool = False, **kw):
    config = transformers.Qwen3Config(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=72,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=64,
        rms_norm_eps=1e-6,
        tie_word_embeddings=tie,
        initializer_range=0.1,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        **kw,
    )
    return _random_norms(transformers.Qwen3ForCausalLM(config).eval())


def _gemma2(**kw):
    """Three layers, sliding / full / sliding, a window of 4 keys on 12-token sequences, and caps
    low enough to bind (Gemma 2's own, 50 and 30, barely touch a small random model)."""
    config = transformers.Gemma2Config(
        **{
            "vocab_size": V,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 3,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 8,
            "max_position_embeddings": 64,
            "query_pre_attn_scalar": 8,
            "sliding_window": 4,
            "attn_logit_softcapping": 2.0,
            "final_logit_softcapping": 3.0,
            "initializer_range": 0.1,
            "bos_token_id": None,
            "eos_token_id": None,
            "pad_token_id": None,
            **kw,
        }
    )
    return _random_norms(transformers.Gemma2ForCausalLM(config).eval())


def _olmo2(**kw):
    config = transformers.Olmo2Config(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=72,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rms_norm_eps=1e-6,
        initializer_range=0.1,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        **kw,
    )
    return _random_norms(transformers.Olmo2ForCausalLM(config).eval())


def _gpt_neox(**kw):
    config = transformers.GPTNeoXConfig(
        **{
            "vocab_size": V,
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 64,
            "max_position_embeddings": 64,
            "rotary_pct": 1.0,
            "initializer_range": 0.1,
            "bos_token_id": None,
            "eos_token_id": None,
            **kw,
        }
    )
    return _random_biases(transformers.GPTNeoXForCausalLM(config).eval())


def _deepseek_v3(q_lora_rank=None, **kw):
    """Dense layers only (first_k_dense_replace covers them all), interleaved RoPE rows; the
    mixture layers are tests/interop/test_hf_deepseek_v3.py's."""
    config = transformers.DeepseekV3Config(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=72,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        q_lora_rank=q_lora_rank,
        kv_lora_rank=12,
        qk_nope_head_dim=8,
        qk_rope_head_dim=4,
        v_head_dim=6,
        first_k_dense_replace=2,
        max_position_embeddings=64,
        rms_norm_eps=1e-6,
        initializer_range=0.1,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        **kw,
    )
    return _random_norms(transformers.DeepseekV3ForCausalLM(config).eval())


def _smollm3(**kw):
    config = transformers.SmolLM3Config(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=72,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rms_norm_eps=1e-6,
        initializer_range=0.1,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        **kw,
    )
    return _random_norms(transformers.SmolLM3ForCausalLM(config).eval())


def _random_norms(model):
    """Fresh norms are all ones (Gemma's all zeros): randomise every norm's weight so a norm
    mapped to the wrong place, or Gemma's 1 + w read as w, shows in the logits."""
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if "norm" in name:
                tensor.normal_(0.0, 0.1).add_(1.0)
    return model


def _random_biases(model):
    """Fresh models start with zero biases and unit LayerNorms: randomise them, and BART's
    final_logits_bias buffer, so a bias mapped to the wrong place shows in the logits."""
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name or "layernorm" in name:
                tensor.normal_(0.0, 0.1).add_(1.0 if name.endswith("weight") else 0.0)
    return model


FAMILIES = {
    "llama": _llama,
    "llama-tied": lambda: _llama(tie=True),
    "llama-linear-rope": lambda: _llama(rope_parameters={"rope_type": "linear", "rope_theta": 500.0, "factor": 2.0}),
    "llama-wide-heads": lambda: _llama(head_dim=16),  # H·Dh = 64 > D = 32
    # trained on 8 positions, run on 12: the base grows with the length (transformers' dynamic rule)
    "llama-dynamic-rope": lambda: _llama(
        positions=8, rope_parameters={"rope_type": "dynamic", "rope_theta": 500.0, "factor": 4.0}
    ),
    "gpt2": _gpt2,
    "gpt2-relu": lambda: _gpt2("relu"),
    "bert": _bert,
    "bert-untied": lambda: _bert(tie_word_embeddings=False),
    "t5-v1.0": _t5,
    "t5-v1.1": lambda: _t5("gated-gelu", tie=False),
    "t5-gated-silu": lambda: _t5("gated-silu", tie=False),
    "t5-deeper-decoder": lambda: _t5(decoder_layers=3),
    "bart": _bart,
    "bart-scaled-relu": lambda: _bart(scale_embedding=True, activation_function="relu"),
    "qwen3": _qwen3,
    "qwen3-tied-linear-rope": lambda: _qwen3(
        tie=True, rope_parameters={"rope_type": "linear", "rope_theta": 500.0, "factor": 2.0}
    ),
    "gemma2": _gemma2,  # sliding, full, sliding
    "gemma2-all-sliding-uncapped": lambda: _gemma2(
        layer_types=["sliding_attention"] * 3,
        attn_logit_softcapping=None,
        final_logit_softcapping=None,
        query_pre_attn_scalar=16,
    ),
    "gemma2-all-full": lambda: _gemma2(num_hidden_layers=2, layer_types=["full_attention"] * 2),
    "olmo2": _olmo2,
    "olmo2-wide-heads-tied": lambda: _olmo2(head_dim=16, tie_word_embeddings=True),  # H·Dh = 64 > D = 32
    "deepseek_v3": _deepseek_v3,  # latent attention, queries through one projection
    "deepseek_v3-q-lora-tied": lambda: _deepseek_v3(q_lora_rank=10, tie_word_embeddings=True),
    "gpt_neox": _gpt_neox,  # attention and feed-forward in parallel, from two norms
    "gpt_neox-sequential-tied": lambda: _gpt_neox(
        use_parallel_residual=False, tie_word_embeddings=True, hidden_act="gelu_new"
    ),
    "gpt_neox-partial-rope": lambda: _gpt_neox(rotary_pct=0.25),  # Pythia's fraction: 2 of 8 dimensions turn
    "smollm3": _smollm3,  # NoPE in layer 4 of 4
    "smollm3-nope-every-2-yarn": lambda: _smollm3(
        no_rope_layer_interval=2,
        tie_word_embeddings=False,
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 500.0,
            "factor": 4.0,
            "original_max_position_embeddings": 4,
        },
    ),
}
KIND = {"bert": "masked", "t5": "seq2seq", "bart": "seq2seq"}  # the rest are causal


def kind_of(hf_model) -> str:
    return KIND.get(hf_model.config.model_type, "causal")


def _batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, V, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0  # right padding: learned positions then agree on every real token
    mask[2, 5:] = 0
    return ids, mask


def _inputs(kind: str):
    """(HF keyword arguments, zoo positional + keyword arguments, mask of the positions to compare)."""
    ids, mask = _batch()
    if kind == "seq2seq":
        g = torch.Generator().manual_seed(1)
        dec = torch.randint(3, V, (3, 9), generator=g)
        dmask = torch.ones_like(dec)
        dmask[1, 6:] = 0
        hf = dict(input_ids=ids, attention_mask=mask, decoder_input_ids=dec, decoder_attention_mask=dmask)
        return hf, dict(hf), dmask
    hf = dict(input_ids=ids, attention_mask=mask)
    if kind == "masked":
        hf["token_type_ids"] = (torch.arange(12) >= 6).long().expand(3, 12)  # two segments
    return hf, dict(hf), mask


def _max_diff(a, b, mask):
    keep = mask.bool()
    return float((a[keep] - b[keep]).abs().max())


@pytest.fixture(params=sorted(FAMILIES))
def hf_model(request):
    torch.manual_seed(0)
    return FAMILIES[request.param]()


def test_logits_match_on_a_padded_batch(hf_model):
    hf_inputs, zoo_inputs, mask = _inputs(kind_of(hf_model))
    model = from_hf(hf_model)
    with torch.no_grad():
        expected = hf_model(**hf_inputs).logits
        got = model(**zoo_inputs).logits
    assert got.shape == expected.shape
    assert _max_diff(got, expected, mask) <= 1e-4


def test_round_trip_back_to_transformers(hf_model):
    hf_inputs, _, mask = _inputs(kind_of(hf_model))
    back = to_hf(from_hf(hf_model))
    assert type(back) is type(hf_model)
    with torch.no_grad():
        assert _max_diff(back(**hf_inputs).logits, hf_model(**hf_inputs).logits, mask) <= 1e-4


# a masked LM does not generate; transformers' T5 sizes its KV cache by the encoder's depth, so its
# own generate fails (IndexError) when the decoder is deeper; transformers' dynamic RoPE keeps the keys
# its cache rotated at shorter lengths' frequencies, so its cached decoding differs from its own
# forward (zoo's equals its forward: it caches the keys unrotated, tests/nn/test_rope_options.py)
GENERATING = sorted(
    n for n in FAMILIES if not n.startswith("bert") and n not in ("t5-deeper-decoder", "llama-dynamic-rope")
)


@pytest.mark.parametrize("name", GENERATING)
def test_greedy_generation_gives_the_same_tokens(name):
    torch.manual_seed(0)
    hf_model = FAMILIES[name]()
    kind = kind_of(hf_model)
    model = from_hf(hf_model)
    prompt = torch.randint(3, V, (1, 6), generator=torch.Generator().manual_seed(1))
    start = hf_model.config.decoder_start_token_id if kind == "seq2seq" else None
    with torch.no_grad():
        theirs = hf_model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=20,
            do_sample=False,
            num_beams=1,
            eos_token_id=None,
            pad_token_id=0,
            forced_bos_token_id=None,
            forced_eos_token_id=None,
        )
        ours = generate(model, prompt, max_new_tokens=20, eos_id=None, bos_id=start)
    theirs = theirs[:, 1:] if kind == "seq2seq" else theirs[:, prompt.shape[1] :]  # drop the start / the prompt
    assert ours.tolist() == theirs.tolist()


# every model preset -> the transformers class it exports to (None: no Hugging Face family)
PRESET_EXPORTS = {
    "gpt": "GPT2LMHeadModel",
    "llama": "LlamaForCausalLM",
    "bert": "BertForMaskedLM",
    "t5": "T5ForConditionalGeneration",
    "bart": "BartForConditionalGeneration",
    "transformer": None,
    "qwen3": "Qwen3ForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "olmo2": "Olmo2ForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "olmoe": "OlmoeForCausalLM",
    "gpt_oss": "GptOssForCausalLM",
    "smollm3": "SmolLM3ForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
    "gdn_hybrid": "Qwen3NextForCausalLM",
    "qwen3_next": "Qwen3NextForCausalLM",
    "bamba": "BambaForCausalLM",
}
# its NoPE layer is the 4th; the hybrid's full layer is its 4th
PRESET_SIZES = {
    "smollm3": ["model.n_layers=4"],
    "gdn_hybrid": ["model.n_layers=4"],
    "qwen3_next": ["model.n_layers=4"],
    "bamba": ["model.n_layers=4"],
}
SMALL = ["model.d_model=32", "model.n_heads=4", "model.n_layers=2", "model.vocab_size=97", "model.dropout=0.0"]


def test_every_preset_has_an_export_entry():
    from pathlib import Path

    presets = {p.stem for p in (Path(zoo.__file__).parents[1] / "conf" / "model").glob("*.yaml")}
    assert presets == set(PRESET_EXPORTS)


@pytest.mark.parametrize("preset", sorted(p for p, cls in PRESET_EXPORTS.items() if cls))
def test_a_composed_preset_exports_with_the_same_logits(preset):
    """A model composed in zoo (not converted from HF), with its own random weights, exports to
    its family (T5's default 1/sqrt(Dh) is folded into W_q)."""
    torch.manual_seed(0)
    model = zoo.build_model(zoo.compose([f"model={preset}", *SMALL, *PRESET_SIZES.get(preset, [])]).model).eval()
    with torch.no_grad():
        for name, tensor in model.state_dict().items():  # no zero biases, no unit norms
            if name.endswith("bias") or "norm" in name:
                tensor.normal_(0.0, 0.1).add_(1.0 if name.endswith("norm.weight") else 0.0)
    hf = to_hf(model)
    assert type(hf).__name__ == PRESET_EXPORTS[preset]
    hf_inputs, zoo_inputs, mask = _inputs(kind_of(hf))
    with torch.no_grad():
        assert _max_diff(hf(**hf_inputs).logits, model(**zoo_inputs).logits, mask) <= 1e-4


@pytest.mark.parametrize(
    "overrides",
    [
        ["model=bert", "model.token_types=0"],  # HF's one row of zeros
        ["model=bart", "model.tie_embeddings=false"],
        ["model=llama", "model.tie_embeddings=true"],
        ["model=t5", "model.attention_scale=2.0"],
    ],
)  # folded into W_q
def test_a_variant_of_a_preset_exports_with_the_same_logits(overrides):
    torch.manual_seed(0)
    model = zoo.build_model(zoo.compose([*overrides, *SMALL]).model).eval()
    hf = to_hf(model)
    hf_inputs, zoo_inputs, mask = _inputs(kind_of(hf))
    if kind_of(hf) == "masked":
        hf_inputs.pop("token_type_ids"), zoo_inputs.pop("token_type_ids")
    with torch.no_grad():
        assert _max_diff(hf(**hf_inputs).logits, model(**zoo_inputs).logits, mask) <= 1e-4
    tied = hf.get_output_embeddings().weight.data_ptr() == hf.get_input_embeddings().weight.data_ptr()
    assert tied == model.config.tie_embeddings


@pytest.mark.parametrize(
    "overrides, family",
    [
        (["model=llama", "model.qk_norm=head"], "Qwen3ForCausalLM"),  # Llama has no QK-norm: never Llama
        (["model=llama", "model.qk_norm=head", "model.qk_norm_type=rmsnorm"], "Qwen3ForCausalLM"),
        (["model=gpt", "model/position=rope"], "GPTNeoXForCausalLM"),  # GPT-2 has learned positions
        (["model=gpt", "model/position=rope", "model.position.rotary_fraction=0.5"], "GPTNeoXForCausalLM"),
        (["model=llama", "model.position.nope_every=2"], "SmolLM3ForCausalLM"),  # Llama has no NoPE layers
        (["model=llama", "model.position.scaling=yarn", "model.position.scale=4"], "LlamaForCausalLM"),
        (
            ["model=llama", "model.position.scaling=dynamic", "model.position.scale=4", "model.max_seq_len=8"],
            "LlamaForCausalLM",
        ),
        (["model=gpt", "model/position=rope", "model.block=parallel_two_norms"], "GPTNeoXForCausalLM"),
        (["model=gemma2", "model.attention=full", "model.window=null", "model.global_every=null"], "Gemma2ForCausalLM"),
        (
            [
                "model=gemma2",
                "model.window=5",
                "model.global_every=null",
                "model.attn_softcap=null",
                "model.attention_scale=0.25",
            ],
            "Gemma2ForCausalLM",
        ),  # query_pre_attn_scalar 16
    ],
)
def test_a_block_option_exports_as_the_family_that_has_it(overrides, family):
    """A composition that sets a block option exports as the family that has the option, with the
    same logits, never as the family it started from (which would drop the option silently)."""
    torch.manual_seed(0)
    model = zoo.build_model(zoo.compose([*overrides, *SMALL]).model).eval()
    with torch.no_grad():
        for name, tensor in model.state_dict().items():  # no zero biases, no unit norms
            if name.endswith("bias") or "norm" in name:
                tensor.normal_(0.0, 0.1).add_(1.0 if name.endswith("norm.weight") else 0.0)
    hf = to_hf(model)
    assert type(hf).__name__ == family
    hf_inputs, zoo_inputs, mask = _inputs("causal")
    with torch.no_grad():
        assert _max_diff(hf(**hf_inputs).logits, model(**zoo_inputs).logits, mask) <= 1e-4


# ModelConfig keys every converter reads itself (sizes, the choices `composed_as` names, what only
# initialisation or training reads); every other key is an option that must be in OPTIONS
READ_BY_EVERY_CONVERTER = {
    "family",
    "position",
    "norm",
    "norm_type",
    "norm_eps",
    "activation",
    "d_model",
    "n_heads",
    "n_kv_heads",
    "head_dim",
    "n_layers",
    "n_decoder_layers",
    "d_ff",
    "ff_mult",
    "param_budget",
    "vocab_size",
    "max_seq_len",
    "dropout",
    "tie_embeddings",
    "bias",
    "init_std",
    "embed_init",
    "mup_base_d_model",
    "mup_base_head_dim",
    "checkpoint_activations",
}


def test_every_model_option_is_one_a_family_must_say_it_reproduces():
    """A model key added to the schema joins OPTIONS at its default: until a converter says it
    reproduces another value, no family exports a model that sets one (it would write a model
    that computes something else)."""
    from dataclasses import fields

    from zoo.config.schema.model import ModelConfig, model_defaults
    from zoo.interop.hf.common import OPTIONS

    keys = {f.name for f in fields(ModelConfig)}
    assert sorted(keys - READ_BY_EVERY_CONVERTER - set(OPTIONS)) == []
    defaults = model_defaults()
    assert [key for key in set(OPTIONS) & keys if defaults[key] not in OPTIONS[key]] == []


# a non-default value of each block and attention option
NEW_OPTIONS = [
    {"qk_norm": "head"},
    {"qk_norm": "projection"},
    {"qk_norm": "head", "qk_norm_type": "layernorm"},
    {"block": "parallel"},
    {"block": "parallel_two_norms"},
    {"attn_softcap": 2.0},
    {"final_softcap": 2.0},
    {"attention": "sliding", "window": 3},
    {"norm": "sandwich"},
    {"norm": "reordered"},
    {"kv": "latent", "n_kv_heads": None, "qk_norm": "none"},
]


@functools.cache
def _composed(preset: str) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(zoo.compose([f"model={preset}", *SMALL, *PRESET_SIZES.get(preset, [])]).model)


@pytest.mark.parametrize("option", NEW_OPTIONS, ids=lambda o: " ".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("preset", sorted(p for p, cls in PRESET_EXPORTS.items() if cls))
def test_an_option_a_family_lacks_never_exports_as_that_family(preset, option):
    """Every preset with every new option: refused (by the schema, or by every converter), or
    exported to a family that computes the same logits; never written as a family that drops
    the option."""
    from zoo.config.errors import ConfigError

    torch.manual_seed(0)
    try:
        model = zoo.build_model({**_composed(preset), **option}).eval()
    except ConfigError:
        return  # refused before any weight exists
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name.endswith("bias") or "norm" in name:
                tensor.normal_(0.0, 0.1).add_(1.0 if name.endswith("norm.weight") else 0.0)
    try:
        hf = to_hf(model)
    except UnsupportedConfig as refused:
        assert "matches no supported" in str(refused)
        return
    hf_inputs, zoo_inputs, mask = _inputs(kind_of(hf))
    if kind_of(hf) == "masked":
        hf_inputs.pop("token_type_ids"), zoo_inputs.pop("token_type_ids")
    with torch.no_grad():
        assert _max_diff(hf(**hf_inputs).logits, model(**zoo_inputs).logits, mask) <= 1e-4, type(hf).__name__


def test_gpt2_exports_with_its_head_tied_as_gpt2_has_it():
    torch.manual_seed(0)
    hf = to_hf(zoo.build_model(zoo.compose(["model=gpt", *SMALL]).model))
    assert hf.config.tie_word_embeddings
    assert hf.lm_head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr()  # one matrix, saved once


def test_weights_that_do_not_line_up_are_refused_naming_them():
    from zoo.interop.hf.common import load_exact

    module = torch.nn.Linear(2, 3)
    state = dict(module.state_dict())
    load_exact(module, state)
    with pytest.raises(UnsupportedConfig, match=r"missing \['bias'\], unexpected \[\]"):
        load_exact(module, {"weight": state["weight"]})
    with pytest.raises(UnsupportedConfig, match=r"missing \[\], unexpected \['extra'\]"):
        load_exact(module, {**state, "extra": torch.zeros(1)})


@pytest.mark.parametrize(
    "build, field",
    [
        (
            lambda: _llama(
                rope_parameters={
                    "rope_type": "yarn",
                    "rope_theta": 1e4,
                    "factor": 4.0,
                    "original_max_position_embeddings": 32,
                    "mscale": 0.707,
                }
            ),
            "mscale=0.707",
        ),
        (
            lambda: _llama(
                rope_parameters={
                    "rope_type": "llama3",
                    "rope_theta": 1e4,
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 32,
                }
            ),
            "'llama3'",
        ),
        (lambda: _smollm3(no_rope_layers=[1, 0, 0, 1]), "no_rope_layers="),
        (lambda: _smollm3(use_sliding_window=True, sliding_window=4), "layer_types="),
        (lambda: _llama(attention_bias=True), "attention_bias=True"),
        (lambda: _llama(hidden_act="gelu"), "hidden_act='gelu'"),
        (lambda: _gpt2(scale_attn_by_inverse_layer_idx=True), "scale_attn_by_inverse_layer_idx=True"),
        (lambda: _gpt2("silu"), "activation_function='silu'"),
        (lambda: _bert(position_embedding_type="relative_key"), "position_embedding_type='relative_key'"),
        (lambda: _bert("silu"), "hidden_act='silu'"),
        (lambda: _bert(is_decoder=True), "is_decoder=True"),
        (lambda: _t5("gated-relu"), "feed_forward_proj='gated-relu'"),
        (lambda: _bart(decoder_ffn_dim=32), "encoder_ffn_dim=64 differs from decoder_ffn_dim=32"),
        (lambda: _qwen3(partial_rotary_factor=0.5), "partial_rotary_factor=0.5"),  # Qwen3 rotates whole heads
        (lambda: _gpt_neox(attention_bias=False), "attention_bias=False"),
        (lambda: _gpt_neox(hidden_act="gelu_fast"), "hidden_act='gelu_fast'"),
        (lambda: _qwen3(use_sliding_window=True, sliding_window=4, max_window_layers=1), "layer_types="),
        (lambda: _qwen3(attention_bias=True), "attention_bias=True"),
        (lambda: _olmo2(attention_bias=True), "attention_bias=True"),
        (lambda: _gemma2(layer_types=["full_attention", "sliding_attention", "sliding_attention"]), "layer_types="),
        (lambda: _gemma2(use_bidirectional_attention=True), "use_bidirectional_attention=True"),
        (lambda: _gemma2(hidden_activation="gelu"), "hidden_activation='gelu'"),
    ],
)
def test_an_unsupported_config_names_the_field(build, field):
    with pytest.raises(UnsupportedConfig, match=field.replace("(", r"\(")):
        from_hf(build())


@pytest.mark.parametrize(
    "overrides",
    [
        ["model=llama", "model/position=alibi"],
        ["model=transformer"],
        ["model=bert", "model.head_transform=false"],
        # options a family lacks: exporting would drop them silently
        ["model=gpt", "model.output_bias=true"],
        ["model=llama", "model.attention_scale=1.0"],
        ["model=bert", "model.scale_output=true"],
        # block options no family here has in this composition
        ["model=llama", "model.qk_norm=projection"],
        ["model=llama", "model.attn_softcap=30.0"],
        ["model=llama", "model.final_softcap=30.0"],
        ["model=llama", "model.block=parallel"],
        ["model=llama", "model.norm=sandwich"],
        ["model=llama", "model.norm=reordered"],
        ["model=llama", "model.attention=sliding", "model.window=4"],
        ["model=gpt", "model.qk_norm=head"],
        ["model=gpt", "model/position=rope", "model.block=parallel"],
        ["model=qwen3", "model.qk_norm_type=layernorm"],
        ["model=qwen3", "model.attention=sliding", "model.window=4"],
        ["model=llama", "model.position.rotary_fraction=0.5"],  # only GPT-NeoX rotates part of a head
        ["model=gemma2", "model.position.theta_local=500"],  # Gemma 2 has one base
        ["model=qwen3", "model.position.nope_every=2"],  # SmolLM3 has NoPE, not with QK-norm
        ["model=llama", "model.position.scaling=ntk", "model.position.scale=4"],  # transformers has no static NTK
        ["model=olmo2", "model.qk_norm=head"],
        ["model=gemma2", "model.attention_scale=0.3"],  # 1/0.09: no integer
        ["model=gemma2", "model.qk_norm=head"],
    ],
)
def test_a_composition_without_a_family_is_refused(overrides):
    model = zoo.build_model(zoo.compose([*overrides, *SMALL]).model)
    with pytest.raises(UnsupportedConfig, match="matches no supported"):
        to_hf(model)


@pytest.mark.parametrize("bare", ["LlamaModel", "BertModel", "T5Model"])
def test_a_model_without_its_language_model_head_is_refused(bare):
    config = {"LlamaModel": _llama, "BertModel": _bert, "T5Model": _t5}[bare]().config
    with pytest.raises(UnsupportedConfig, match=f"{bare} has no language-model head"):
        from_hf(getattr(transformers, bare)(config))


@pytest.mark.parametrize("preset", sorted(p for p, cls in PRESET_EXPORTS.items() if cls))
def test_an_export_keeps_the_models_dropout(preset):
    """A zoo model without dropout exports to a Hugging Face model without dropout: fine-tuned
    in transformers (training mode), it computes the logits it computes in evaluation mode."""
    torch.manual_seed(0)
    model = zoo.build_model(zoo.compose([f"model={preset}", *SMALL, *PRESET_SIZES.get(preset, [])]).model).eval()
    assert model.config.dropout == 0.0
    hf = to_hf(model)
    hf_inputs, _, mask = _inputs(kind_of(hf))
    with torch.no_grad():
        evaluated = hf.eval()(**hf_inputs).logits
        trained = hf.train()(**hf_inputs).logits
    assert _max_diff(trained, evaluated, mask) == 0.0
