"""Layer patterns (`model.layer_pattern`, `model.global_every` over a recurrent kind): each layer's
kind tiled over each stack, sliding, full and recurrent layers with mixture layers in one model,
its parameters and FLOPs counted torch-free equal to the built model's, from the command line as
from Python; and the refusals of a pattern or a recurrent layer, each on one line before any
weight exists."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

import zoo
from tests.conftest import tiny
from tests.contract.conftest import flop_counter
from zoo.cli.compose import compose
from zoo.config import ConfigError, ModelConfig, as_model_config
from zoo.config.facts.attention import AttentionKind, layer_mixers, mixer_counts
from zoo.config.facts.ffn import FFNKind, layer_kinds
from zoo.config.schema.params import non_embedding_params
from zoo.models.speculative import check_speculative

GDN, FULL, SLIDING = AttentionKind.gated_deltanet, AttentionKind.full, AttentionKind.sliding


def test_global_every_over_a_recurrent_kind_is_qwen3_nexts_three_to_one():
    cfg = ModelConfig(**tiny(attention="gated_deltanet", global_every=4, n_layers=8))
    assert layer_mixers(cfg, 8) == [GDN, GDN, GDN, FULL] * 2
    assert layer_mixers(ModelConfig(**tiny(attention="gated_deltanet", n_layers=3)), 3) == [GDN] * 3


@pytest.mark.parametrize(
    "kinds",
    [
        {},
        {"attention": "sliding", "window": 4, "global_every": 3},
        {"attention": "gated_deltanet", "global_every": 4},
        {"layer_pattern": ["gated_deltanet", "sliding", "gated_deltanet", "full"], "window": 4},
        {"layer_pattern": ["full", "gated_deltanet", "gated_deltanet"]},
    ],
    ids=["plain", "sliding-every-3", "gdn-every-4", "pattern-of-4", "pattern-of-3"],
)
def test_the_counted_kinds_are_the_listed_ones_at_every_depth(kinds):
    """`mixer_counts` (what the parameter count reads, without a loop over the layers) is
    `layer_mixers` counted, at depths that leave every remainder of the period."""
    cfg = ModelConfig(**tiny(n_layers=12, **kinds))
    for depth in range(13):
        assert mixer_counts(cfg, depth) == Counter(layer_mixers(cfg, depth)), depth


def test_a_pattern_tiles_sliding_full_recurrent_and_mixture_layers():
    """[gated_deltanet, sliding, gated_deltanet, full] over 8 layers, mixtures in every second
    layer: each layer is built as its kinds say, a forward and backward are finite, and the
    torch-free parameters and FLOPs (at a context inside the window) are the built model's."""
    cfg = ModelConfig(
        **tiny(
            "decoder_only",
            "rope",
            n_layers=8,
            layer_pattern=["gated_deltanet", "sliding", "gated_deltanet", "full"],
            window=33,
            ffn="moe",
            moe_experts=4,
            moe_top_k=2,
            moe_d_ff=8,
            moe_every=2,
            bias=False,
        )
    )
    assert cfg.layer_pattern == ("gated_deltanet", "sliding", "gated_deltanet", "full")
    assert cfg.to_dict()["layer_pattern"] == ["gated_deltanet", "sliding", "gated_deltanet", "full"]
    model = zoo.build_model(cfg)
    stack = model.decoder
    assert stack.mixers == [GDN, SLIDING, GDN, FULL] * 2
    assert stack.windows == [None, 33, None, None] * 2
    assert layer_kinds(cfg, 8) == [FFNKind.dense, FFNKind.moe] * 4
    ids = torch.randint(4, 37, (2, 32))
    model(ids).logits.float().logsumexp(-1).mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters() if p.requires_grad)
    summary = zoo.summarize(model.eval(), seq_len=32)
    assert non_embedding_params(cfg) == summary.non_embedding_params
    with flop_counter() as counter, torch.no_grad():
        model(ids[:1])
    assert counter.get_total_flops() == 32 * summary.flops_per_token


def test_a_pattern_of_attention_kinds_tiles_each_stack_of_an_encoder_decoder():
    cfg = tiny("encoder_decoder", n_layers=2, n_decoder_layers=4, layer_pattern=["sliding", "full"], window=5)
    model = zoo.build_model(cfg)
    assert model.encoder.windows == [5, None] and model.decoder.windows == [5, None, 5, None]


def test_the_command_line_sets_a_pattern():
    model = as_model_config(
        compose(
            ["model=llama", "model.n_layers=4", "model.layer_pattern=[gated_deltanet,gated_deltanet,full,full]"]
        ).model
    )
    assert model.layer_pattern == ("gated_deltanet", "gated_deltanet", "full", "full")
    preset = as_model_config(compose(["model=gdn_hybrid"]).model)
    assert layer_mixers(preset, preset.n_layers) == [GDN, GDN, GDN, FULL] * (preset.n_layers // 4)


# Mamba 2 small enough for `tiny` (E = 32: 4 heads of 8), chunks of 4 (the prompt of 5 is two)
SSM = {"ssm_head_dim": 8, "ssm_state": 8, "ssm_chunk": 4}


@pytest.mark.parametrize(
    "bad, words",
    [
        (dict(layer_pattern=["gated_deltanet", "full", "full"], n_layers=4), "do not tile model.n_layers=4"),
        (dict(layer_pattern=[]), "non-empty list"),
        (dict(layer_pattern=["mamba"]), "model.layer_pattern='mamba' is not allowed"),
        (dict(layer_pattern=["full", "full"], attention="sliding", window=3), "leave model.attention at full"),
        (dict(layer_pattern=["gated_deltanet", "full"], global_every=2), "set one"),
        (dict(layer_pattern=["sliding", "full"]), "model.window must be a positive integer"),
        (dict(layer_pattern=["gated_deltanet", "full"], window=3), "model.window=3 only applies"),
        (dict(attention="full", global_every=2), "model.global_every=2 only applies"),
        (dict(attention="gated_deltanet", global_every=3), "model.global_every=3 exceeds model.n_layers=2"),
        (dict(family="encoder_only", layer_pattern=["gated_deltanet", "full"]), "causal decoder layer"),
        (dict(attention="gated_deltanet", kv="latent", position="rope"), "model.kv=latent"),
        (dict(attention="gated_deltanet", position="shaw"), "model.position.kind=shaw"),
        (dict(attention="gated_deltanet", position="relative"), "model.position.kind=relative"),
        (dict(attention="gated_deltanet", value_residual="learned"), "model.value_residual"),
        (dict(attention="gated_deltanet", value_embeds=1), "model.value_embeds"),
        (dict(linear_value_dim=4), "model.linear_value_dim=4 only applies to Gated DeltaNet layers"),
        (dict(attention="gated_deltanet", linear_value_heads=3), "must be a multiple of model.linear_key_heads=2"),
        (dict(attention="gated_deltanet", linear_key_dim=0), "model.linear_key_dim must be a positive integer"),
        (dict(attention="gated_deltanet", conv_kernel=0), "model.conv_kernel must be a positive integer"),
        (dict(attention="mamba2", conv_kernel=0, **SSM), "model.conv_kernel must be a positive integer"),
        (dict(attention="mamba2", position="shaw", **SSM), "model.position.kind=shaw"),
        (
            dict(family="encoder_only", attention="mamba2", **SSM),
            r"model.attention=mamba2 has a recurrent layer \(mamba2\)",
        ),
        (
            dict(layer_pattern=["gated_deltanet", "full"], ssm_state=8),
            "model.ssm_state=8 only applies to Mamba 2 layers",
        ),
        (dict(layer_pattern=["mamba2", "full"], ssm_head_dim=12), "must be divisible by model.ssm_head_dim=12"),
    ],
)
def test_refused_on_one_line_before_weights(bad, words):
    with pytest.raises(ConfigError, match=words) as refused:
        ModelConfig(**tiny(**bad))
    assert "\n" not in str(refused.value)


def test_speculative_decoding_refuses_a_recurrent_layer():
    """The state keeps no past to roll back to: refused on one line, before decoding."""
    from zoo.models.mtp import MultiTokenPrediction

    cfg = ModelConfig(**tiny(attention="gated_deltanet", global_every=2))
    with pytest.raises(ValueError, match="a recurrent layer's state cannot") as refused:
        check_speculative(zoo.build_model(cfg), MultiTokenPrediction(cfg, 1))
    assert "\n" not in str(refused.value)


def test_zoo_compare_names_arms_by_their_pattern():
    """Runs that differ by their layer pattern are arms named by it, compactly
    (`zoo.compare.patterns`; tests/compare/test_patterns.py names every form)."""
    from pathlib import Path

    from zoo.compare.report import group_arms
    from zoo.compare.runs import Run, RunStatus

    patterns = [None, ["gated_deltanet", "full"], ["gated_deltanet", "gated_deltanet", "gated_deltanet", "full"]]
    runs = [
        Run(path=Path(str(i)), overrides=[], config={"model.layer_pattern": p, "seed": 0}, status=RunStatus.finished)
        for i, p in enumerate(patterns)
    ]
    arms, keys = group_arms(runs)
    assert keys == ["model.layer_pattern"]
    names = [arm.settings["model.layer_pattern"] for arm in arms]
    assert names == ["(unset)", "gated_deltanet 1:1 full", "gated_deltanet 3:1 full"]


@pytest.mark.parametrize("first", ["gated_deltanet", "mamba2"])
@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
def test_a_patterns_cached_decoding_past_the_window_is_the_whole_forward(static, first):
    """Recurrent states (Gated DeltaNet's; Mamba 2's beside one), a sliding layer's window of keys
    and a full layer's keys in one cache: the prompt, then one token at a time past the window,
    give the whole forward's logits."""
    T = 13
    cfg = tiny("decoder_only", "rope", n_layers=4, layer_pattern=[first, "sliding", "gated_deltanet", "full"])
    ssm = SSM if first == "mamba2" else {}
    model = zoo.build_model({**cfg, **ssm, "window": 3, "max_seq_len": 40}).eval()
    ids = torch.randint(4, 37, (2, T))
    cache = model.new_cache(capacity=T if static else None)
    with torch.no_grad():
        outs = [model(ids[:, :5], cache=cache, use_cache=True).logits]
        for t in range(5, T):
            outs.append(model(ids[:, t : t + 1], cache=cache, use_cache=True).logits)
        reference = model(ids).logits
    torch.testing.assert_close(torch.cat(outs, dim=1), reference, atol=1e-5, rtol=1e-4)
    assert [layer.state is not None for layer in cache.layers] == [True, False, True, False]
