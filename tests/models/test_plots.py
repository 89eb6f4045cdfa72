"""Attention maps and position-scheme plots."""

from __future__ import annotations

import pytest
import torch

import zoo
from tests.conftest import FAMILIES, POSITIONS, tiny
from zoo.models.visualize import attention_maps, plot_attention, plot_positions

PNG = b"\x89PNG\r\n\x1a\n"


def is_png(path) -> bool:
    import matplotlib.image

    return path.read_bytes()[:8] == PNG and matplotlib.image.imread(path).ndim == 3


@pytest.mark.parametrize("family", FAMILIES)
def test_attention_maps_are_distributions_and_causal_where_causal(family, tmp_path):
    model = zoo.build_model(tiny(family, "alibi"))
    ids = torch.randint(6, 37, (1, 6))
    kwargs = {"decoder_input_ids": ids[:, :4]} if family == "encoder_decoder" else {}
    maps = attention_maps(model, ids, **kwargs)
    stacks = {"encoder_only": {"encoder"}, "decoder_only": {"decoder"},
              "encoder_decoder": {"encoder", "decoder", "cross"}}[family]
    assert {key[0] for key in maps} == stacks and {key[1] for key in maps} == {0, 1}
    for (stack, _), weights in maps.items():
        T = 4 if stack in ("decoder", "cross") and family == "encoder_decoder" else 6
        S = 6 if stack in ("encoder", "cross") or family == "decoder_only" else 4
        assert weights.shape == (2, T, S)
        assert torch.allclose(weights.sum(-1), torch.ones(2, T), atol=1e-5)
        if stack == "decoder":
            assert (weights.triu(1) == 0).all()
    assert all(not m.keep_weights for m in model.modules() if hasattr(m, "keep_weights"))
    labels = [str(i) for i in range(6)]
    q_labels = labels[:4] if family == "encoder_decoder" else labels
    path = plot_attention(maps, tmp_path / "a.png", query_tokens=q_labels, key_tokens=q_labels,
                          source_tokens=labels, heads=[1])
    assert is_png(path)
    with pytest.raises(ValueError, match="layer 5"):
        attention_maps(model, ids, layers=[5], **kwargs)
    with pytest.raises(ValueError, match="head 2"):
        plot_attention(maps, tmp_path / "b.png", query_tokens=q_labels, key_tokens=q_labels, heads=[2])


@pytest.mark.parametrize("position", POSITIONS)
def test_every_position_scheme_has_a_picture(position, tmp_path):
    model = zoo.build_model(tiny("decoder_only", position))
    assert is_png(plot_positions(model, tmp_path / f"{position}.png", length=16))
