"""The routing picture of a comparison with mixture-of-experts arms (`routing.png`): for each arm
whose runs logged their routing (model.ffn=moe, callbacks.routing_every), a heatmap of the load
of each expert (columns) in each mixture layer (rows), as E x the share of the layer's routed
slots the expert took (1 = balanced, E = every token on it), from the last values each finished
run's summary.json keeps, averaged over the arm's seeds. A collapsed router (task.moe_balance=0)
shows as a bright cell in a dark row."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from zoo.compare.plots import _pyplot, _save, name
from zoo.compare.runs import RunStatus

LOAD = re.compile(r"^train/moe_load/layer_(\d+)/expert_(\d+)$")


def arm_loads(arm) -> np.ndarray | None:
    """(layers, experts): E x each expert's last load, the mean over the arm's finished runs that
    logged it; None where none did."""
    tables = []
    for run in arm.runs:
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
            tables.append(table)
    if not tables or len({t.shape for t in tables}) != 1:
        return None
    return np.mean(tables, axis=0)


def figure_routing(report):
    """One heatmap per arm with routing (see the module docstring); None when no arm has any."""
    arms = [(arm, loads) for arm in report.arms if (loads := arm_loads(arm)) is not None]
    if not arms:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(arms), figsize=(1.6 + 2.8 * len(arms), 2.8), squeeze=False)
    top = max(2.0, max(float(np.nanmax(loads)) for _, loads in arms))
    for j, (ax, (arm, loads)) in enumerate(zip(axes[0], arms)):
        image = ax.imshow(loads, cmap="viridis", vmin=0.0, vmax=top, aspect="auto")
        ax.set_title(name(report, arm), fontsize=8)
        ax.set_xlabel("expert")
        if j == 0:  # the rows are the same layers in every arm
            ax.set_ylabel("mixture layer")
        ax.set_xticks(range(loads.shape[1]))
        ax.set_yticks(range(loads.shape[0]))
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
    fig.colorbar(image, ax=axes[0].tolist(), label="load x E (1 = balanced; last step, mean over seeds)")
    return fig


def plot_routing(report, path: Path) -> Path | None:
    """Write routing.png, or nothing (None) when no arm logged its routing."""
    fig = figure_routing(report)
    return None if fig is None else _save(_pyplot(), fig, path)
