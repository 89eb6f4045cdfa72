"""Composition through Hydra: presets, overrides, and loud rejection of bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import zoo
from tests.conftest import ACTIVATIONS, NORMS, POSITIONS
from zoo.config import ConfigError, as_model_config

PRESETS = {
    # preset: (family, position, norm, norm_type, activation, tie_embeddings, bias)
    "gpt": ("decoder_only", "learned", "pre", "layernorm", "gelu", True, True),
    "bert": ("encoder_only", "learned", "post", "layernorm", "gelu", True, True),
    "transformer": ("encoder_decoder", "sinusoidal", "post", "layernorm", "relu", True, True),
    "t5": ("encoder_decoder", "relative", "pre", "rmsnorm", "relu", True, False),
    "llama": ("decoder_only", "rope", "pre", "rmsnorm", "swiglu", False, False),
    "bart": ("encoder_decoder", "learned", "post", "layernorm", "gelu", True, True),
    "qwen3": ("decoder_only", "rope", "pre", "rmsnorm", "swiglu", False, False),
    "gemma2": ("decoder_only", "rope", "sandwich", "rmsnorm", "geglu_tanh", True, False),
    "olmo2": ("decoder_only", "rope", "reordered", "rmsnorm", "swiglu", False, False),
    "mixtral": ("decoder_only", "rope", "pre", "rmsnorm", "swiglu", False, False),
    "olmoe": ("decoder_only", "rope", "pre", "rmsnorm", "swiglu", False, False),
    "gpt_oss": ("decoder_only", "rope", "pre", "rmsnorm", "swiglu", False, True),
    "deepseek_v3": ("decoder_only", "rope", "pre", "rmsnorm", "swiglu", False, False),
    "smollm3": ("decoder_only", "rope", "pre", "rmsnorm", "swiglu", True, False),
    "gdn_hybrid": ("decoder_only", "rope", "pre", "rmsnorm", "swiglu", False, False),
    "qwen3_next": ("decoder_only", "rope", "pre", "rmsnorm", "swiglu", False, False),
    "bamba": ("decoder_only", "rope", "pre", "rmsnorm", "swiglu", False, False),
}
SMALL = ["model.d_model=32", "model.n_heads=2", "model.n_layers=1", "model.vocab_size=50"]


def test_default_is_a_small_gpt():
    cfg = zoo.compose()
    assert cfg.model.family == "decoder_only" and cfg.model.position.kind == "learned"


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_presets_have_their_documented_choices(preset):
    m = as_model_config(zoo.compose([f"model={preset}"]).model)
    family, position, norm, norm_type, activation, tie, bias = PRESETS[preset]
    assert (m.family, m.position.kind, m.norm, m.norm_type, m.activation) == (
        family,
        position,
        norm,
        norm_type,
        activation,
    )
    assert (m.tie_embeddings, m.bias) == (tie, bias)
    assert m.embed_norm == (preset in ("bert", "bart"))


# a preset's option that refuses a position scheme, on one line before any weight exists
REFUSED_POSITIONS = {
    ("deepseek_v3", "shaw"): "model.kv=latent does not take model/position=shaw",
    # SmolLM3's RoPE options (its base, its NoPE layers) are RoPE's own
    **{("smollm3", p): "only applies to model/position=rope" for p in POSITIONS if p != "rope"},
    # a recurrent layer has no positions: the schemes with learned tables in the attention are refused
    **{("gdn_hybrid", p): "holds learned parameters in the attention" for p in ("relative", "shaw")},
    # Qwen3-Next's RoPE (its base, the rotated quarter of each head) and Bamba's (half) are RoPE's own
    **{
        (h, p): "only applies to model/position=rope" for h in ("qwen3_next", "bamba") for p in POSITIONS if p != "rope"
    },
}
# its NoPE layer is the 4th; the hybrid's full layer is its 4th; two elsewhere (gemma2 alternates sliding and global)
LAYERS = {"smollm3": 4, "gdn_hybrid": 4, "qwen3_next": 4, "bamba": 4}


# each preset with every position scheme, the placements taking turns: every pair of preset x
# position x placement in 119 compositions, a test a preset
@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.slow
def test_a_preset_takes_every_position_and_norm(subtests, preset):
    turn = sorted(PRESETS).index(preset)
    for k, position in enumerate(POSITIONS):
        norm = NORMS[(k + turn) % len(NORMS)]
        with subtests.test(position=position, norm=norm):
            layers = f"model.n_layers={LAYERS.get(preset, 2)}"
            overrides = [f"model={preset}", f"model/position={position}", f"model.norm={norm}", *SMALL, layers]
            if (preset, position) in REFUSED_POSITIONS:
                with pytest.raises(ConfigError, match=REFUSED_POSITIONS[preset, position]):
                    zoo.compose(overrides)
                continue
            cfg = zoo.compose(overrides)
            model = zoo.build_model(cfg.model).eval()
            assert model.config.position.kind == position and model.config.norm == norm
            ids = torch.randint(0, 50, (1, 5))
            kwargs = {"decoder_input_ids": ids} if model.config.family == "encoder_decoder" else {}
            assert model(ids, **kwargs).logits.shape == (1, 5, 50)


def test_derived_values_follow_overrides():
    m = as_model_config(zoo.compose(["model.n_heads=8", "model.d_model=128"]).model)
    assert (m.n_kv_heads, m.head_dim, m.d_ff) == (8, 16, 512)
    m = as_model_config(zoo.compose(["model=llama", "model.d_model=96", "model.n_heads=2"]).model)
    assert m.d_ff == 256  # 8/3·96 = 256, already a multiple of 64
    m = as_model_config(zoo.compose(["model=transformer"]).model)
    assert m.n_decoder_layers == m.n_layers


@pytest.mark.parametrize(
    "overrides, fragments",
    [
        (["model.d_modle=3"], ["d_modle", "allowed keys", "d_model"]),
        (["model.norm=middle"], ["model.norm", "middle", "pre, post"]),
        (["model.activation=tanh"], ["tanh", ", ".join(ACTIVATIONS)]),  # every registered one
        (["model.norm_type=batchnorm"], ["batchnorm", "layernorm, rmsnorm"]),
        (["model.n_heads=abc"], ["model.n_heads", "abc"]),
        (
            ["model=lama"],
            [
                "model/lama",
                ", ".join(
                    sorted(
                        path.stem for path in (Path(__file__).resolve().parents[2] / "conf" / "model").glob("*.yaml")
                    )
                ),
            ],
        ),
        (["model/position=rop"], ["rop", "alibi", "rope", "sinusoidal"]),
        (["model.position.foo=1"], ["foo", "allowed keys", "theta"]),
        (["model.d_model=100", "model.n_heads=3"], ["100", "3", "divisible"]),
        (["model.n_heads=4", "model.n_kv_heads=3"], ["4", "3", "n_kv_heads"]),
        (["model/position=rope", "model.d_model=12", "model.n_heads=4"], ["rope", "3", "even"]),
        (["model/position=alibi", "model.position.theta=500000"], ["theta", "rope", "alibi"]),
        (["model.n_decoder_layers=2"], ["n_decoder_layers", "encoder_decoder"]),
        (["model.dropout=1.5"], ["dropout", "1.5"]),
        (["model.n_layers=0"], ["n_layers", "0"]),
        (["model/position=rope", "model.position.scale=0.5"], ["scale", "0.5"]),
    ],
)
def test_bad_input_fails_at_compose_time_with_one_line(overrides, fragments):
    with pytest.raises(ConfigError) as info:
        zoo.compose(overrides)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_build_model_validates_before_allocating():
    with pytest.raises(ConfigError, match=r"d_model \(30\).*n_heads \(4\)"):
        zoo.build_model({"d_model": 30, "n_heads": 4})
    with pytest.raises(ConfigError, match="unknown key model.colour"):
        zoo.build_model({"colour": "red"})


def test_config_round_trips_through_plain_data():
    m = as_model_config(zoo.compose(["model=t5"]).model)
    data = m.to_dict()
    assert data["family"] == "encoder_decoder" and data["position"]["kind"] == "relative"
    assert as_model_config(data) == m
    assert all(isinstance(v, (str, int, float, bool, type(None), dict)) for v in data.values())


def test_summary_counts():
    model = zoo.build_model(zoo.compose(SMALL).model)
    s = zoo.summarize(model, seq_len=64)
    assert s.total_params == sum(p.numel() for p in model.parameters())
    # tied: the token table counts once; plus the learned position table
    assert s.embedding_params == 50 * 32 + 256 * 32
    assert s.non_embedding_params == s.total_params - s.embedding_params
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert s.flops_per_token == 2 * linear + 4 * 64 * 32 * 1


def test_the_byte_tokenizer_sizes_the_model_vocabulary():
    """tokenizer=byte fixes V = 262: the model's table follows it instead of the schema's 8192
    (8k rows never used); model.vocab_size on the command line or in a recipe still wins."""
    from zoo.data.tokenizers.byte import ByteTokenizer

    assert zoo.compose(["tokenizer=byte"]).model.vocab_size == ByteTokenizer().vocab_size == 262
    assert zoo.compose(["tokenizer=byte", "model=llama"]).model.vocab_size == 262
    assert zoo.compose(["tokenizer=byte", "model.vocab_size=300"]).model.vocab_size == 300
    assert zoo.compose(config_name="quick").model.vocab_size == 300  # the recipe's own
    assert zoo.compose().model.vocab_size == 8192  # a trained tokenizer: the model's size sets its vocabulary
