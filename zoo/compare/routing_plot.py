"""The routing picture of a comparison with mixture-of-experts arms (`routing.png`): for each arm
whose runs logged their routing (model.ffn=moe, callbacks.routing_every), a heatmap of the load
of each expert (columns) in each mixture layer of each seed (rows: layer 0 of every seed, then
layer 1, ...), as E x the share of the layer's routed slots the expert took (1 = balanced, E =
every token on it), from the last values each finished run's summary.json keeps. Seeds are not
averaged: two seeds that collapse onto different experts would average to a balanced-looking
row. A collapsed router (task.moe_balance=0) shows as a bright cell in a dark row."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np

from zoo.compare.plots import _pyplot, _save, name
from zoo.compare.runs import RunStatus

LOAD = re.compile(r"^train/moe_load/layer_(\d+)/expert_(\d+)$")


def arm_loads(runs) -> tuple[np.ndarray, list[str]] | None:
    """((layers x seeds, experts) of E x each expert's last load, the row labels "L0 s1"): one
    row per mixture layer and finished run of `runs` that logged it, layer-major; None where none did."""
    tables = []
    for run in runs:
        if run.status != RunStatus.finished:
            continue
        cells = {}
        for key, value in ((run.summary or {}).get("metrics") or {}).items():
            match = LOAD.match(key)
            if match and isinstance(value, (int, float)):
                cells[int(match.group(1)), int(match.group(2))] = float(value)
        if cells:
            layers, experts = max(i for i, _ in cells) + 1, max(e for _, e in cells) + 1
            table = np.full((layers, experts), np.nan)
            for (i, e), value in cells.items():
                table[i, e] = value * experts
            tables.append((run.seed, table))
    if not tables or len({t.shape for _, t in tables}) != 1:
        return None
    tables.sort(key=lambda st: str(st[0]))
    rows = [(f"L{i} s{seed}", table[i]) for i in range(tables[0][1].shape[0]) for seed, table in tables]
    return np.stack([r for _, r in rows]), [label for label, _ in rows]


def figure_routing(report, tuned: str | None = None):
    """One heatmap per arm with routing (see the module docstring); None when no arm has any.
    `tuned` (a tuned report's key): each arm's runs at its best value of it, the value in its title."""

    def runs_of(arm):
        return (arm.best.runs if arm.best else []) if tuned else arm.runs

    def title(arm):  # wrapped: an arm's name lists every setting it changes
        return textwrap.fill(name(report, arm), 44) + (f"\nat {tuned}={arm.best.value}" if tuned else "")

    arms = [(arm, *found) for arm in report.arms if (found := arm_loads(runs_of(arm))) is not None]
    if not arms:
        return None
    plt = _pyplot()
    height = 1.2 + 0.3 * max(len(labels) for _, _, labels in arms)
    fig, axes = plt.subplots(1, len(arms), figsize=(2.2 + 3.4 * len(arms), height + 0.6), squeeze=False)
    top = max(2.0, max(float(np.nanmax(loads)) for _, loads, _ in arms))
    for j, (ax, (arm, loads, labels)) in enumerate(zip(axes[0], arms)):
        image = ax.imshow(loads, cmap="viridis", vmin=0.0, vmax=top, aspect="auto")
        ax.set_title(title(arm), fontsize=8)
        ax.set_xlabel("expert")
        if j == 0:
            ax.set_ylabel("mixture layer, seed")
        ax.set_xticks(range(loads.shape[1]))
        ax.set_yticks(range(loads.shape[0]), labels, fontsize=6)
        for (i, e), value in np.ndenumerate(loads):
            ax.text(
                e,
                i,
                f"{value:.2f}",
                ha="center",
                va="center",
                fontsize=6,
                color="white" if value < top / 2 else "black",
            )
    fig.colorbar(image, ax=axes[0].tolist(), label="load x E\n(1 = balanced; last logged step)")
    return fig


def plot_routing(report, path: Path, tuned: str | None = None) -> Path | None:
    """Write routing.png, or nothing (None) when no arm logged its routing."""
    fig = figure_routing(report, tuned)
    return None if fig is None else _save(_pyplot(), fig, path)
