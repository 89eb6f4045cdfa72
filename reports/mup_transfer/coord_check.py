"""The coordinate check (Yang et al. 2022, "Tensor Programs V", §C) of this study's own model:
the decoder mup_transfer trains (2 layers, 4 heads, tied embeddings, vocabulary 300, no dropout)
at d_model 64, 128, 256 and 512, under standard parametrization and under μP with its base at
width 64, trained a few AdamW steps (weight decay 0.1, betas 0.9/0.999, the study's optimizer)
at one peak rate, with no warmup, on one fixed batch of 16 x 64 bytes of the King James Bible
(UTF-8 bytes as token ids). After each step the mean |coordinate| of every layer's output: the
token embedding, each attention and feed-forward sub-layer and the logits. Under μP they should
keep their size as the width grows; under standard the hidden layers' updates grow with width.

    python reports/mup_transfer/coord_check.py [LR]      # -> coord.csv, coord.md, coord.png beside this file

LR defaults to 8e-3, the rate both grids chose at the base width. Three seeds (model
initialisation and batch offset), the mean shown. coord.csv is measured (it trains); coord.md is
made from it (`generate`), and `zoo-compare recompute=` makes it again and compares it line by
line with this one."""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

import zoo
from zoo.config.schema.model import ModelConfig
from zoo.config.schema.train import OptimConfig
from zoo.data.corpora.kjv import kjv_verses
from zoo.models.parametrization import optimizer_scales
from zoo.tasks.optim import build_optimizer

HERE = Path(__file__).resolve().parent
WIDTHS = (64, 128, 256, 512)
STEPS = 5
SEEDS = (0, 1, 2)
B, T, V = 16, 64, 300
LR = 8e-3
# what recompute= makes again (`generate`), and the input it is made from that no table rebuilds
GENERATES = ("coord.md",)
MEASURED = {"coord.csv": "trained a few steps at each width: python reports/mup_transfer/coord_check.py 8e-3"}


def config(width: int, parametrization: str) -> ModelConfig:
    mup = {"mup_base_d_model": 64} if parametrization == "mup" else {}
    return ModelConfig(
        family="decoder_only",
        d_model=width,
        n_heads=4,
        n_layers=2,
        vocab_size=V,
        max_seq_len=T,
        dropout=0.0,
        parametrization=parametrization,
        **mup,
    )


def batch(seed: int) -> torch.Tensor:
    """(B, T + 1) UTF-8 bytes of the KJV from B evenly spaced offsets, moved by the seed."""
    text = "\n".join(kjv_verses().texts).encode("utf-8")
    stride = len(text) // B
    starts = [i * stride + 7919 * seed for i in range(B)]
    return torch.tensor([list(text[s : s + T + 1]) for s in starts], dtype=torch.long)  # (B, T+1)


def coordinates(width: int, parametrization: str, lr: float, seed: int) -> list[dict]:
    """One row per step 1..STEPS and layer: mean |output| after that many AdamW steps."""
    cfg = config(width, parametrization)
    torch.manual_seed(seed)
    model = zoo.build_model(cfg)
    head = model.lm_head.weight if model.lm_head is not None else None
    optimizer = build_optimizer(
        model,
        OptimConfig(kind="adamw", lr=lr, weight_decay=0.1),
        output_embedding=head,
        scales=optimizer_scales(model, cfg),
    )
    ids = batch(seed)
    inputs, targets = ids[:, :-1], ids[:, 1:]  # (B, T) each
    sizes: dict[str, float] = {}
    layers = {"embedding": model.embed}
    for i, block in enumerate(model.decoder.layers):
        layers[f"layer {i} attention"] = block.self_attn
        layers[f"layer {i} feed-forward"] = block.ff
    for name, layer in layers.items():
        layer.register_forward_hook(
            lambda _m, _i, out, name=name: sizes.__setitem__(name, float(out.detach().abs().mean()))
        )
    rows = []
    for step in range(STEPS + 1):
        logits = model(inputs).logits  # (B, T, V)
        sizes["logits"] = float(logits.detach().abs().mean())
        if step:
            rows += [
                {
                    "parametrization": parametrization,
                    "width": width,
                    "seed": seed,
                    "step": step,
                    "layer": k,
                    "mean_abs": v,
                }
                for k, v in sizes.items()
            ]
        if step == STEPS:
            return rows
        optimizer.zero_grad()
        F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1)).backward()  # (B*T, V) against (B*T,)
        optimizer.step()
    return rows


def main(lr: float) -> None:
    torch.set_num_threads(1)
    rows = [r for p in ("standard", "mup") for w in WIDTHS for s in SEEDS for r in coordinates(w, p, lr, s)]
    with (HERE / "coord.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (HERE / "coord.md").write_text(markdown(rows, lr))
    plot(means(rows), list(dict.fromkeys(r["layer"] for r in rows)), lr)


def generate(directory: Path, lr: float = LR) -> dict[str, str]:
    """coord.md, from the coord.csv in `directory` (measured at `lr`)."""
    with (directory / "coord.csv").open(newline="") as handle:
        rows = [
            {
                **r,
                "width": int(r["width"]),
                "seed": int(r["seed"]),
                "step": int(r["step"]),
                "mean_abs": float(r["mean_abs"]),
            }
            for r in csv.DictReader(handle)
        ]
    return {"coord.md": markdown(rows, lr)}


def means(rows: list[dict]) -> dict:
    """(parametrization, layer, step, width) -> the mean over seeds of mean |output|."""
    mean: dict = {}
    for r in rows:
        mean.setdefault((r["parametrization"], r["layer"], r["step"], r["width"]), []).append(r["mean_abs"])
    return {k: statistics.fmean(v) for k, v in mean.items()}


def markdown(rows: list[dict], lr: float) -> str:
    """coord.md: each layer's mean |output| after the last step, by width."""
    mean = means(rows)
    layer_names = list(dict.fromkeys(r["layer"] for r in rows))
    lines = [
        f"# Coordinate check of the mup_transfer model (peak rate {lr:g}, {STEPS} AdamW steps)",
        "",
        f"Mean |output| of each layer after step {STEPS}, mean over seeds {', '.join(map(str, SEEDS))}, and its "
        f"growth from width {WIDTHS[0]} to {WIDTHS[-1]} (`coord_check.py`; every step and seed in coord.csv).",
        "",
        "| parametrization | layer | " + " | ".join(f"width {w}" for w in WIDTHS) + f" | {WIDTHS[-1]} / {WIDTHS[0]} |",
        "|---|---|" + "---|" * (len(WIDTHS) + 1),
    ]
    for p in ("standard", "mup"):
        for layer in layer_names:
            values = [mean[p, layer, STEPS, w] for w in WIDTHS]
            lines.append(
                f"| {'μP' if p == 'mup' else p} | {layer} | "
                + " | ".join(f"{v:.3g}" for v in values)
                + f" | {values[-1] / values[0]:.2f}× |"
            )
    return "\n".join(lines) + "\n"


def plot(mean: dict, layer_names: list[str], lr: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, p in zip(axes, ("standard", "mup")):
        for layer in layer_names:
            ax.plot(WIDTHS, [mean[p, layer, STEPS, w] for w in WIDTHS], marker="o", markersize=3, label=layer)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(WIDTHS, [str(w) for w in WIDTHS])
        ax.set_xlabel("d_model")
        ax.set_title(
            f"{'μP (base width 64)' if p == 'mup' else 'standard'}: after {STEPS} steps at lr {lr:g}", fontsize=9
        )
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean |output| (mean over 3 seeds)")
    axes[1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=7)
    fig.tight_layout()
    fig.savefig(HERE / "coord.png", dpi=120)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else LR)
