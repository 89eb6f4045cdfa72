"""The rows of `zoo.config.facts.blocks` and `zoo.config.facts.placements` in step with the
built blocks: every kind has a row and a YAML, the norms a row counts are the modules a block
holds, and what a row refuses is refused on one line before any weight exists."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import zoo
from tests.conftest import FAMILIES, tiny
from zoo.config import ConfigError, ModelConfig
from zoo.config.facts.blocks import BLOCK_FACTS, QK_NORM_FACTS, BlockKind, QKNorm, non_default_block_options
from zoo.config.facts.placements import PLACEMENT_FACTS, NormPlacement
from zoo.config.schema.task import TaskConfig
from zoo.nn.attention import Attention
from zoo.nn.block import Block, Stack, SubLayer

CONF = Path(__file__).resolve().parents[3] / "conf" / "model"


def test_every_kind_has_one_row_in_enum_order():
    assert list(BLOCK_FACTS) == list(BlockKind)
    assert list(QK_NORM_FACTS) == list(QKNorm)
    assert list(PLACEMENT_FACTS) == list(NormPlacement)
    for row in [*BLOCK_FACTS.values(), *QK_NORM_FACTS.values(), *PLACEMENT_FACTS.values()]:
        assert row.what and row.paper


@pytest.mark.parametrize("group, kinds", [("block", BlockKind), ("qk_norm", QKNorm)])
def test_every_kind_has_a_yaml_that_sets_its_key(group, kinds):
    files = {p.stem: yaml.safe_load(p.read_text()) for p in (CONF / group).glob("*.yaml")}
    assert set(files) == {k.value for k in kinds}
    for kind, content in files.items():
        assert content == {"model": {group: kind}}
        assert getattr(zoo.compose([f"model/{group}={kind}"]).model, group) == kind


@pytest.mark.parametrize("norm", list(NormPlacement))
def test_a_placement_row_counts_the_norms_its_sub_layer_and_stack_hold(norm):
    cfg = ModelConfig(**tiny(norm=norm.value))
    sub = SubLayer(cfg)
    norms = [m for name, m in sub.named_children() if name.startswith("norm")]
    assert len(norms) == PLACEMENT_FACTS[norm].norms_per_sublayer
    stack = Stack(cfg, n_layers=1, causal=True, cross=False)
    assert (type(stack.final_norm).__name__ != "Identity") == PLACEMENT_FACTS[norm].final_norm


@pytest.mark.parametrize("block", list(BlockKind))
def test_a_block_row_says_whether_its_branches_share_their_norms(block):
    cfg = ModelConfig(**tiny("encoder_decoder", block=block.value))
    built = Block(cfg, cross=True)
    subs = [m for m in built.modules() if isinstance(m, SubLayer)]
    assert len(subs) == (1 if BLOCK_FACTS[block].shared_norms else 3)
    assert built.parallel == BLOCK_FACTS[block].parallel


@pytest.mark.parametrize("qk_norm", list(QKNorm))
def test_a_qk_norm_row_gives_the_widths_of_the_norms_an_attention_holds(qk_norm):
    cfg = ModelConfig(**tiny(qk_norm=qk_norm.value, n_heads=4, n_kv_heads=2))
    attn = zoo.build_model(cfg).decoder.layers[0].self_attn
    widths = tuple(getattr(attn, name).weight.shape[0] for name in ("q_norm", "k_norm") if hasattr(attn, name))
    assert widths == QK_NORM_FACTS[qk_norm].widths(cfg)


@pytest.mark.parametrize("family", FAMILIES)
def test_only_parallel_two_norms_with_post_is_refused_on_one_line(family):
    refused = []
    for block in BlockKind:
        for norm in NormPlacement:
            try:
                ModelConfig(**tiny(family, block=block.value, norm=norm.value))
            except ConfigError as exc:
                assert "\n" not in str(exc) and "model.block=parallel_two_norms" in str(exc)
                refused.append((block, norm))
    assert refused == [(BlockKind.parallel_two_norms, NormPlacement.post)]


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({"qk_norm_type": "rmsnorm"}, ["model.qk_norm_type", "qk_norm=head"]),
        ({"qk_norm": "rms"}, ["model.qk_norm", "head, projection"]),
        ({"block": "serial"}, ["model.block", "parallel_two_norms"]),
        ({"attn_softcap": 0}, ["model.attn_softcap", "> 0"]),
        ({"final_softcap": -3.0}, ["model.final_softcap", "> 0"]),
        ({"final_softcap": float("inf")}, ["model.final_softcap"]),
        ({"attn_softcap": True}, ["model.attn_softcap"]),
    ],
)
def test_bad_block_options_are_refused_naming_the_key(overrides, words):
    with pytest.raises(ConfigError) as info:
        ModelConfig(**tiny(**overrides))
    assert "\n" not in str(info.value) and all(w in str(info.value) for w in words), str(info.value)


@pytest.mark.parametrize(
    "task, words",
    [
        ({"kind": "classification", "z_loss": 1e-4}, ["task.z_loss", "classification"]),
        ({"output_loss": "liger", "z_loss": 1e-4}, ["task.z_loss", "liger"]),
        ({"z_loss": -1.0}, ["task.z_loss", ">= 0"]),
    ],
)
def test_z_loss_refusals(task, words):
    with pytest.raises(ConfigError) as info:
        TaskConfig(**task)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_softcaps_reach_every_attention_and_the_caps_are_floats():
    cfg = ModelConfig(**tiny("encoder_decoder", attn_softcap=50, final_softcap=30))
    assert cfg.attn_softcap == 50.0 and isinstance(cfg.attn_softcap, float)
    model = zoo.build_model(cfg)
    caps = {m.softcap for m in model.modules() if isinstance(m, Attention)}
    assert caps == {50.0}


def test_the_bench_peers_are_told_every_block_option_they_would_drop():
    plain = ModelConfig(**tiny())
    assert non_default_block_options(plain) == []
    options = ModelConfig(**tiny(norm="sandwich", block="parallel", qk_norm="head", attn_softcap=50, final_softcap=30))
    assert non_default_block_options(options) == [
        "model.norm=sandwich",
        "model.block=parallel",
        "model.qk_norm=head",
        "model.attn_softcap=50",
        "model.final_softcap=30",
    ]
