"""The benchmark's figures as a Markdown table (the JSON holds the same and more)."""

from __future__ import annotations

COLUMNS = [
    ("train_tokens_per_s", "train tokens/s", "{:,.0f}"),
    ("train_spread", "spread", "{:.0%}"),
    ("mfu", "MFU", "{:.0%}"),
    ("fit_tokens_per_s", "Trainer.fit tokens/s", "{:,.0f}"),
    ("forward_ms", "forward ms", "{:,.1f}"),
    ("generate_tokens_per_s_batch1", "generate tokens/s (batch 1)", "{:,.0f}"),
    ("generate_tokens_per_s_batch{gen_batch}", "generate tokens/s (batch {gen_batch})", "{:,.0f}"),
    ("generate_bandwidth_share", "batch 1, share of the bandwidth limit", "{:.1%}"),
    ("memory_mb", "train memory MB", "{:,.0f}"),
]


def markdown(result: dict) -> str:
    w = result["workload"]
    cfg = w["model"]
    gen_batch = w["gen_batch"]
    columns = [(key.format(gen_batch=gen_batch), title.format(gen_batch=gen_batch), fmt) for key, title, fmt in COLUMNS]
    columns = [c for c in columns if any(c[0] in row for row in result["rows"])]
    lines = [
        f"{result['machine']['device']}, {result['machine']['threads']} threads, torch {result['machine']['torch']}; "
        f"{cfg['family']} d_model {cfg['d_model']}, {cfg['n_layers']} layers, {cfg['n_heads']} heads, "
        f"vocab {cfg['vocab_size']}; batch {w['batch']} x {w['seq_len']} tokens; medians of {w['rounds']} "
        f"interleaved rounds",
    ]
    if columns:  # measure=decode alone has its own table
        lines += ["", "| system | variant | " + " | ".join(title for _, title, _ in columns) + " |"]
        lines.append("|---|---|" + "---|" * len(columns))
    for row in result["rows"] if columns else []:
        cells = [fmt.format(row[key]) if key in row else "" for key, _, fmt in columns]
        lines.append(f"| {row['name']} | {row['variant']} | " + " | ".join(cells) + " |")
    peaks = result.get("matmul_flops_per_s") or {}
    if peaks:
        lines += [
            "",
            "Measured matmul throughput (the MFU denominator): "
            + ", ".join(f"{k} {v / 1e9:,.0f} GFLOP/s" for k, v in peaks.items())
            + f"; model FLOPs per training step {result['train_flops_per_step'] / 1e9:,.2f} G.",
        ]
    if result.get("memory_bytes_per_s"):
        lines += [
            "",
            f"Measured memory bandwidth (a copy's bytes read and written a second): "
            f"{result['memory_bytes_per_s'] / 1e9:,.0f} GB/s; batch 1's limit: tokens/s x the weights' bytes "
            f"(2 a weight in the bf16 variants) at that bandwidth.",
        ]
    if result["ratios"]:
        lines += ["", "| ratio | value |", "|---|---|"]
        lines += [f"| {name} | {value:.2f} |" for name, value in result["ratios"].items()]
    lines += decode_table(result["rows"])
    for peer, why in result.get("unavailable", {}).items():
        lines.append(f"\n{peer}: not compared ({why})")
    return "\n".join(lines) + "\n"


def decode_table(rows: list[dict]) -> list[str]:
    """measure=decode's figures, a line per (row, context); none without them."""
    measured = [row for row in rows if row.get("decode")]
    if not measured:
        return []
    lines = [
        "",
        "| system | variant | context | decode tokens/s | prefill ms | cache MB | counted MB | memory growth MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in measured:
        for d in row["decode"]:
            lines.append(
                f"| {row['name']} | {row['variant']} | {d['context']:,} | {d['decode_tokens_per_s']:,.0f} "
                f"| {d['prefill_ms']:,.1f} | {d['cache_bytes'] / 2**20:,.2f} | {d['cache_bytes_counted'] / 2**20:,.2f} "
                f"| {d['memory_growth_bytes'] / 2**20:,.1f} |"
            )
    return lines


def decode_arms_table(result: dict) -> str:
    """benchmarks/mixer_decode.py's figures: a line per (context, arm), each against the arm
    named "full" (every layer full attention) at that context."""
    lines = [
        "| context | arm | decode tokens/s | vs full | prefill ms | cache MB | vs full |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, L in enumerate(result["contexts"]):
        full = result["arms"]["full"]["decode"][i]
        for name, arm in result["arms"].items():
            d = arm["decode"][i]
            lines.append(
                f"| {L:,} | {name} | {d['decode_tokens_per_s']:,.0f} "
                f"| {d['decode_tokens_per_s'] / full['decode_tokens_per_s']:.2f}x | {d['prefill_ms']:,.0f} "
                f"| {d['cache_bytes'] / 2**20:,.2f} | {d['cache_bytes'] / full['cache_bytes']:.3f}x |"
            )
    return "\n".join(lines) + "\n"
