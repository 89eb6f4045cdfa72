"""A plan as Markdown: the table of one device's memory by part, the largest micro-batch that
fits, and, for a plan that does not fit, why and which override would make it fit."""

from __future__ import annotations

import dataclasses
import math

from zoo.plan.options import PlanOptions, Strategy, show_bytes
from zoo.plan.planner import Plan, plan
from zoo.plan.trace import ACTIVATIONS, GRADIENTS, LOSS, OPTIMIZER, WEIGHTS


def table(p: Plan) -> str:
    o = p.options
    group = f", shards over {o.shard_group}" if o.shard_group > 1 else ""
    lines = [
        f"{p.step.param_count:,} parameters; micro-batch {p.batch} x {p.seq_len} tokens; {o.precision}; "
        f"strategy {o.strategy.value} at world size {o.world_size}{group}; {o.device.value} kernels; "
        f"peak in {p.step.peak_phase}",
        "",
        "| part | per device | share |",
        "|---|---:|---:|",
    ]
    for part, n in p.parts.items():
        if n:
            lines.append(f"| {part} | {show_bytes(n)} | {100 * n / p.total:.1f}% |")
    lines.append(f"| **total** | **{show_bytes(p.total)}** | 100% |")
    if p.step.moe:  # of the weights and activations above
        held = ", ".join(f"{part} {show_bytes(n)}" for part, n in p.step.moe.items())
        lines += ["", f"of which the mixture-of-experts layers hold: {held}"]
    return "\n".join(lines)


def verdict(p: Plan, largest: int) -> list[str]:
    o = p.options
    room = show_bytes(o.memory_bytes)
    if o.reserve_bytes:
        room = f"{show_bytes(o.usable_bytes)} ({room} less {show_bytes(o.reserve_bytes)} reserved)"
    head = [f"largest micro-batch that fits {room}: {largest}"]
    if p.fits:
        return head + [f"fits: {show_bytes(p.total)} of {room}"]
    dominant = p.dominant
    lines = head + [
        f"does not fit: {show_bytes(p.total)} needed, {room}; the largest part is {dominant} "
        f"({show_bytes(p.parts[dominant])})"
    ]
    if largest >= 1:
        lines.append(
            f"fix: data.max_device_batch_size={largest} (batch={largest} here); gradient accumulation keeps "
            f"data.global_batch_size"
        )
    if dominant in (ACTIVATIONS, LOSS) and not p.model.checkpoint_activations:
        model = dataclasses.replace(p.model, checkpoint_activations=True)
        other = plan(model, o, p.batch)
        verdict = "fits" if other.fits else "does not fit either"
        lines.append(
            f"model.checkpoint_activations=true: {show_bytes(other.total)} at micro-batch {p.batch}, {verdict}"
        )
    state = p.parts[WEIGHTS] + p.parts[GRADIENTS] + p.parts[OPTIMIZER]
    if o.strategy in (Strategy.none, Strategy.ddp) and state > 0.25 * o.usable_bytes:
        rest = p.total - state
        room_left = o.usable_bytes - rest
        if room_left > 0:
            shards = max(2, math.ceil(state / room_left))
            lines.append(
                f"trainer=fsdp: weights, gradients and AdamW's moments are {show_bytes(state)} on one device; "
                f"about {shards} devices share them into the room left (strategy=fsdp world_size={shards} "
                f"here)"
            )
        else:
            lines.append(
                f"trainer=fsdp shards weights, gradients and AdamW's moments ({show_bytes(state)}), but the "
                f"rest alone ({show_bytes(rest)}) exceeds the device"
            )
    if dominant == LOSS and o.output_loss.value != "chunked":
        lines.append("task.output_loss=chunked: the (B·T, V) logits are never whole (output_loss=chunked here)")
    return lines


def markdown(p: Plan, largest: int) -> str:
    return "\n".join([table(p), "", *verdict(p, largest)])


def as_json(p: Plan, largest: int) -> dict:
    return {
        "options": {k: (v.value if hasattr(v, "value") else v) for k, v in vars(p.options).items()},
        "model": p.model.to_dict(),
        "batch": p.batch,
        "seq_len": p.seq_len,
        "parts": p.parts,
        "total": p.total,
        "fits": p.fits,
        "largest_micro_batch": largest,
        "peak_phase": p.step.peak_phase,
        "parameters": p.step.param_count,
        **({"moe": p.step.moe} if p.step.moe else {}),
    }


__all__ = ["as_json", "markdown", "table", "verdict", "PlanOptions"]
