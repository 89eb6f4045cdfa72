"""A key that picks every k-th layer (`model.global_every`, `model.moe_every`) with k past a
stack's depth picks no layer: refused on one line naming the key and the depth it exceeds, the
same way for every such key (`zoo.config.facts.layers`). `model.global_every=5` on 4 layers used
to train a stack with no global layer while `model.moe_every=5` was refused."""

from __future__ import annotations

from dataclasses import fields

import pytest

from zoo.config.facts.layers import EVERY_KTH
from zoo.config.schema.model import ModelConfig

SLIDING = ["model/attention=sliding", "model.window=3"]
MOE = ["model/ffn=moe", "model.bias=false", "model.moe_experts=2", "model.moe_top_k=1"]


def test_every_key_of_the_model_that_picks_every_kth_layer_is_checked():
    assert {f.name for f in fields(ModelConfig) if f.name.endswith("_every")} == set(EVERY_KTH)


@pytest.mark.parametrize(
    "args, key, depth",
    [
        ([*SLIDING, "model.n_layers=2", "model.global_every=3"], "model.global_every=3", "model.n_layers=2"),
        ([*MOE, "model.n_layers=2", "model.moe_every=3"], "model.moe_every=3", "model.n_layers=2"),
        (
            ["model=t5", *SLIDING, "model.n_layers=4", "model.n_decoder_layers=2", "model.global_every=3"],
            "model.global_every=3",
            "model.n_decoder_layers=2",
        ),
    ],
    ids=["global_every", "moe_every", "a-shallower-decoder"],
)
def test_an_every_kth_key_past_a_stacks_depth_is_refused_naming_both_keys(cli_here, tmp_path, args, key, depth):
    run = tmp_path / "run"
    result = cli_here("train", *args, "model.d_model=32", "model.n_heads=2", f"hydra.run.dir={run}")
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert f"{key} exceeds {depth}: no layer would be" in lines[0], lines[0]
    assert not run.exists()


@pytest.mark.parametrize("name", sorted(EVERY_KTH))
def test_k_equal_to_the_depth_is_a_valid_model(name):
    variant = {"global_every": {"attention": "sliding", "window": 3}, "moe_every": {"ffn": "moe", "bias": False}}[name]
    cfg = ModelConfig(d_model=32, n_heads=2, n_layers=3, **variant, **{name: 3})
    assert getattr(cfg, name) == 3
