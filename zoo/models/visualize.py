"""Pictures of what a model does: attention weights for one input, and the position scheme.

Uses matplotlib's Agg backend (files only, no display)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

import torch

from zoo.config.facts.families import FAMILY_FACTS
from zoo.config.facts.positions import POSITION_FACTS, Site
from zoo.config.records.atomic import replacing
from zoo.config.schema.model import ModelConfig
from zoo.models.base import ZooModel
from zoo.nn.attention import Attention
from zoo.nn.block import Stack


def attention_modules(model: ZooModel) -> dict[tuple[str, int], Attention]:
    """{(stack, layer): attention module} for every self- and cross-attention, stack being
    "encoder", "decoder" or "cross" (a recurrent layer has no attention weights to show)."""
    found = {}
    for stack_name in ("encoder", "decoder"):
        stack = getattr(model, stack_name, None)
        if stack is None:
            continue
        for i, layer in enumerate(stack.layers):
            if not layer.recurrent:
                found[(stack_name, i)] = layer.self_attn
            if layer.cross_attn is not None:
                found[("cross", i)] = layer.cross_attn
    return found


@torch.no_grad()
def attention_maps(
    model: ZooModel, input_ids: torch.Tensor, *, layers: Sequence[int] | None = None, **model_kwargs
) -> dict[tuple[str, int], torch.Tensor]:
    """One forward pass in eval mode with weight recording switched on for the chosen layers;
    returns {(stack, layer): weights (H, T, S)} for the first row of the batch."""
    modules = {key: m for key, m in attention_modules(model).items() if layers is None or key[1] in layers}
    n_layers = max((key[1] for key in attention_modules(model)), default=-1) + 1
    for layer in layers or ():
        if not 0 <= layer < n_layers:
            raise ValueError(f"layer {layer} does not exist; the model has layers 0..{n_layers - 1}")
    was_training = model.training
    model.eval()
    try:
        for m in modules.values():
            m.keep_weights = True
        model(input_ids, **model_kwargs)
        return {key: m.last_weights[0].float().cpu() for key, m in modules.items() if m.last_weights is not None}
    finally:
        for m in modules.values():
            m.keep_weights, m.last_weights = False, None
        model.train(was_training)


def plot_attention(
    maps: dict[tuple[str, int], torch.Tensor],
    path: str | Path,
    *,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    source_tokens: Sequence[str] | None = None,
    heads: Sequence[int] | None = None,
) -> Path:
    """A grid of heat maps, one row per (stack, layer) and one column per head, written to `path`."""
    import matplotlib.pyplot as plt

    fig = attention_figure(
        maps, query_tokens=query_tokens, key_tokens=key_tokens, source_tokens=source_tokens, heads=heads
    )
    path = Path(path)
    with replacing(path, binary=True) as handle:  # written whole, never through a link at the name
        fig.savefig(handle, dpi=110, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    return path


def attention_figure(
    maps: dict[tuple[str, int], torch.Tensor],
    *,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    source_tokens: Sequence[str] | None = None,
    heads: Sequence[int] | None = None,
):
    """The matplotlib figure `plot_attention` writes: each panel titled with its stack, layer and
    head, its axes labelled query and key with the tokens as ticks, and one colour bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted(maps)
    n_heads = next(iter(maps.values())).shape[0]
    heads = list(heads) if heads is not None else list(range(n_heads))
    for h in heads:
        if not 0 <= h < n_heads:
            raise ValueError(f"head {h} does not exist; the model has heads 0..{n_heads - 1}")
    size = max(len(query_tokens), len(key_tokens)) * 0.22 + 1.8
    # constrained layout keeps each title clear of the tick labels above it and makes room for
    # the colour bar; one bar serves every panel, since every panel has the same scale (0..1)
    fig, axes = plt.subplots(
        len(keys),
        len(heads),
        figsize=(size * len(heads) + 1.2, (size + 0.4) * len(keys)),
        squeeze=False,
        layout="constrained",
    )
    for r, key in enumerate(keys):  # at least one: `maps` has a first entry
        cols = source_tokens if key[0] in ("cross", "encoder") and source_tokens is not None else key_tokens
        rows = source_tokens if key[0] == "encoder" and source_tokens is not None else query_tokens
        for c, h in enumerate(heads):
            ax = axes[r][c]
            image = ax.imshow(maps[key][h].numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
            ax.set_title(f"{key[0]} layer {key[1]}, head {h}", fontsize=9)
            ax.set_xticks(range(len(cols)), [_shown(t) for t in cols], rotation=90, fontsize=7)
            ax.set_yticks(range(len(rows)), [_shown(t) for t in rows], fontsize=7)
            if r == len(keys) - 1 or key[0] != keys[r + 1][0]:
                ax.set_xlabel("key (attended to)", fontsize=8)
            if c == 0:
                ax.set_ylabel("query (attending)", fontsize=8)
    fig.colorbar(image, ax=axes, shrink=min(1.0, 0.9 / len(keys) + 0.3), label="attention weight (each row sums to 1)")
    return fig


def _shown(token: str) -> str:
    """A token as a tick label: a space as '␣' (a blank label reads as a missing one), other
    unprintable characters escaped."""
    return repr(token)[1:-1].replace(" ", "\u2423")


@torch.no_grad()
def plot_positions(model: ZooModel, path: str | Path, *, length: int = 48) -> Path:
    """What the position scheme contributes, by where its row of POSITION_FACTS says it acts:
    a table added to the embeddings (sinusoid, learned) as position × dimension, a bias added to
    the scores (ALiBi, T5, Shaw) by offset per head, a rotation (RoPE) as q·k by offset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg: ModelConfig = model.config
    stack = cast(Stack, model.decoder if FAMILY_FACTS[cfg.family].decoder else model.encoder)
    scheme = stack.position_for(0)
    kind = cfg.position.kind
    fig, ax = plt.subplots(figsize=(7, 4))
    positions = torch.arange(length)[None]  # (1, T)
    acts = POSITION_FACTS[kind].acts
    if Site.embeddings in acts:
        table = scheme.embed(torch.zeros(1, length, cfg.d_model), positions)[0]  # (T, D)
        image = ax.imshow(table.T.numpy(), aspect="auto", cmap="RdBu")
        ax.set_xlabel("position")
        ax.set_ylabel("dimension")
        fig.colorbar(image, ax=ax)
    elif Site.scores in acts:
        # a bias of the positions alone is drawn for any query; one that reads the query (Shaw's)
        # for a random one
        shape = (1, cfg.n_heads, 1, cfg.head_dim)
        q = torch.zeros(shape) if scheme.bias_from_positions_only else torch.randn(shape)
        k = torch.zeros(1, cfg.n_kv_heads, length, cfg.head_dim)
        query_at = torch.tensor([[length // 2]])
        _, _, bias = scheme.attend(q, k, query_at, positions)
        offsets = torch.arange(length) - length // 2
        assert bias is not None, kind  # a scheme that acts on the scores adds a bias
        bias = bias.expand(1, cfg.n_heads, 1, length)
        for h in range(cfg.n_heads):
            ax.plot(offsets.numpy(), bias[0, h, 0].numpy(), label=f"head {h}")
        ax.set_xlabel("key position - query position")
        ax.set_ylabel("added to the attention score")
        ax.legend(fontsize=6)
    elif Site.rotation in acts:
        q = torch.ones(1, 1, 1, cfg.head_dim)
        scores = []
        for offset in range(length):
            qr, kr, _ = scheme.attend(q, q, torch.tensor([[offset]]), torch.tensor([[0]]))
            scores.append(float((qr * kr).sum()))
        ax.plot(range(length), scores)
        ax.set_xlabel("offset between query and key")
        ax.set_ylabel("q·k for q = k = 1")
    else:
        ax.text(0.5, 0.5, "no position information", ha="center", va="center")
        ax.set_axis_off()
    ax.set_title(f"position scheme: {kind.value}")
    fig.tight_layout()
    path = Path(path)
    with replacing(path, binary=True) as handle:  # written whole, never through a link at the name
        fig.savefig(handle, dpi=110, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    return path
