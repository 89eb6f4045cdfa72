"""Attention maps and position-scheme plots."""

from __future__ import annotations

import pytest
import torch

import zoo
from tests.conftest import FAMILIES, POSITIONS, tiny
from zoo.models.visualize import attention_figure, attention_maps, plot_attention, plot_positions

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
    stacks = {
        "encoder_only": {"encoder"},
        "decoder_only": {"decoder"},
        "encoder_decoder": {"encoder", "decoder", "cross"},
    }[family]
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
    path = plot_attention(
        maps, tmp_path / "a.png", query_tokens=q_labels, key_tokens=q_labels, source_tokens=labels, heads=[1]
    )
    assert is_png(path)
    with pytest.raises(ValueError, match="layer 5"):
        attention_maps(model, ids, layers=[5], **kwargs)
    with pytest.raises(ValueError, match="head 2"):
        plot_attention(maps, tmp_path / "b.png", query_tokens=q_labels, key_tokens=q_labels, heads=[2])


@pytest.mark.parametrize("family", ["decoder_only", "encoder_decoder"])
def test_the_attention_map_is_readable(family):
    """No title runs into the tick labels of the panel above it or beside it, no tick label into
    another panel's, the axes say which tokens are queries and which keys, a space is drawn, and
    one colour bar with a label gives the scale."""
    model = zoo.build_model(tiny(family, "alibi"))
    ids = torch.randint(6, 37, (1, 24))
    kwargs = {"decoder_input_ids": ids[:, :20]} if family == "encoder_decoder" else {}
    maps = attention_maps(model, ids, **kwargs)
    tokens = [" " if i % 5 == 4 else f"t{i}" for i in range(24)]
    queries = tokens[:20] if family == "encoder_decoder" else tokens
    fig = attention_figure(maps, query_tokens=queries, key_tokens=queries, source_tokens=tokens)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
        bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
        assert len(panels) == len(maps) * 2 and len(bars) == 1
        assert bars[0].get_ylabel() == "attention weight (each row sums to 1)"

        ticks = {
            ax: [t.get_window_extent(renderer) for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_text()]
            for ax in panels
        }
        outline = {ax: ax.get_tightbbox(renderer) for ax in panels}  # the panel with its labels
        for ax in panels:
            title = ax.title.get_window_extent(renderer)
            for other in panels:
                clashes = [t for t in ticks[other] if t.overlaps(title)]
                assert not clashes, f"{ax.get_title()!r} overlaps the tick labels of {other.get_title()!r}"
                if other is not ax and outline[ax].overlaps(outline[other]):
                    assert not any(t.overlaps(b) for t in ticks[ax] for b in ticks[other]), (
                        f"tick labels of {ax.get_title()!r} and {other.get_title()!r} overlap"
                    )
        assert {ax.get_ylabel() for ax in panels} >= {"query (attending)"}
        assert {ax.get_xlabel() for ax in panels} >= {"key (attended to)"}
        assert "\u2423" in [t.get_text() for t in panels[0].get_xticklabels()]
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


@pytest.mark.parametrize("position", POSITIONS)
def test_every_position_scheme_has_a_picture(position, tmp_path):
    model = zoo.build_model(tiny("decoder_only", position))
    assert is_png(plot_positions(model, tmp_path / f"{position}.png", length=16))
