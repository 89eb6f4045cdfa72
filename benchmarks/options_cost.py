"""The cost of each block, attention and training option: training tokens/s of the baseline
model beside the same model with one option changed, in one process (not a test: run it, read
the table).

    python benchmarks/options_cost.py --rounds 5 --out benchmarks/results/options_cost.json

Each arm is a list of zoo-train overrides (model.*, task.*, optim.*, data.document_mask) on the
baseline, the default `gpt` preset (decoder-only, d_model 256, 4 layers, 4 heads, learned
positions, pre-LN, GELU; dropout 0) at batch 8 × 256 tokens. The training step is zoo-bench's
(`ZooSubject`: the task's loss as zoo-train computes it, backward, the optimizer zoo-train
builds), timed by zoo-bench's own interleaved rounds (every arm once per round, the same order,
so the noise of a shared machine hits every arm alike) and reported as medians with their
spread. Every arm starts from the same seed. `data.document_mask=true` trains on the baseline's
batch with document ids added (documents of `--doc-len` tokens, the block-diagonal causal mask);
the other arms on the batch without them. `--arms` picks arms by their names (the first is the
one the others are divided by; `baseline` unless named otherwise).
"""

from __future__ import annotations

import argparse
import datetime
import enum
import json
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import zoo  # noqa: E402
from zoo.bench.run import _device_name  # noqa: E402
from zoo.bench.timing import interleaved, median, spread, timed  # noqa: E402
from zoo.bench.workload import Workload  # noqa: E402
from zoo.bench.zoo_subject import ZooSubject  # noqa: E402
from zoo.config.errors import ConfigError  # noqa: E402
from zoo.config.schema.convert import as_model_config  # noqa: E402
from zoo.config.schema.model import ModelConfig  # noqa: E402

# name -> overrides of the baseline; the order of the table
ARMS: dict[str, list[str]] = {
    "baseline": [],
    "model.qk_norm=head": ["model.qk_norm=head"],
    "model.qk_norm=projection": ["model.qk_norm=projection"],
    "task.z_loss=1e-4": ["task.z_loss=1e-4"],
    "model.attn_softcap=50": ["model.attn_softcap=50"],
    "model.final_softcap=30": ["model.final_softcap=30"],
    "model.norm=sandwich": ["model.norm=sandwich"],
    "model.norm=reordered": ["model.norm=reordered"],
    "model.block=parallel": ["model.block=parallel"],
    "model.block=parallel_two_norms": ["model.block=parallel_two_norms"],
    "model.attention=sliding model.window=64": ["model.attention=sliding", "model.window=64"],
    "model.attention=sliding model.window=64 model.global_every=2": [
        "model.attention=sliding",
        "model.window=64",
        "model.global_every=2",
    ],
    "data.document_mask=true": ["data.document_mask=true"],
    "optim.kind=muon": ["optim.kind=muon"],
    "model.norm_type=rmsnorm": ["model.norm_type=rmsnorm"],
    # the 2025-26 options (issue "part 3" and the recurrent mixers of "part 4")
    "model.value_embeds=2": ["model.value_embeds=2"],
    "model.value_residual=learned": ["model.value_residual=learned"],
    "model.attn_gate=headwise": ["model.attn_gate=headwise"],
    "model.attn_gate=elementwise": ["model.attn_gate=elementwise"],
    "model.attn_sink=learned": ["model.attn_sink=learned"],
    "model.activation=relu2": ["model.activation=relu2"],
    "model.kv=latent": ["model.kv=latent"],
    "model.hyper_connections=dynamic": ["model.hyper_connections=dynamic"],
    "task.mtp_depth=1": ["task.mtp_depth=1"],
    "model.attention=gated_deltanet model.global_every=2": ["model.attention=gated_deltanet", "model.global_every=2"],
    "model.attention=mamba2 model.global_every=2": [
        "model.attention=mamba2",
        "model.global_every=2",
        "model.ssm_head_dim=32",
    ],
    # the speedrun ring's six changes at once (recipes/arm/speedrun/all.yaml)
    "speedrun all": [
        "model.value_embeds=2",
        "model.value_residual=learned",
        "model.attn_gate=elementwise",
        "model.activation=relu2",
        "model.attn_sink=learned",
        "task.mtp_depth=1",
        "task.mtp_weight=0.3",
    ],
}

# the only data key an arm may set: it changes the batch, not the model
DOCUMENT_MASK = "data.document_mask"


@dataclass
class Arm:
    """One arm, built: the subject that trains and the batch it trains on."""

    name: str
    overrides: list[str]
    subject: ZooSubject
    batch: dict


def _plain(value):
    """A composed config value as the task's hyperparameters take it (enums by their value)."""
    return value.value if isinstance(value, enum.Enum) else value


def arm_parts(overrides: list[str], shape: list[str]) -> tuple[ModelConfig, dict, dict, bool]:
    """The arm's overrides composed as zoo-train composes them (an unknown key or kind is refused
    here, before any weight exists) -> (ModelConfig, task keys, optim keys, document mask)."""
    keys = [o.split("=", 1)[0] for o in overrides]
    other = [
        o
        for o, k in zip(overrides, keys)
        if not (k.startswith(("model.", "task.", "optim.")) or k in ("model", DOCUMENT_MASK))
    ]
    if other:
        raise ConfigError(f"{other[0]!r}: an arm overrides model.*, task.*, optim.* or {DOCUMENT_MASK} only")
    cfg = zoo.compose(["model.dropout=0.0", *shape, *overrides])
    task = {k.split(".", 1)[1]: _plain(cfg.task[k.split(".", 1)[1]]) for k in keys if k.startswith("task.")}
    optim = {k.split(".", 1)[1]: _plain(cfg.optim[k.split(".", 1)[1]]) for k in keys if k.startswith("optim.")}
    document_mask = bool(cfg.data.get("document_mask", False)) if DOCUMENT_MASK in keys else False
    return as_model_config(cfg.model), task, optim, document_mask


def with_documents(batch: dict, doc_len: int) -> dict:
    """The batch with document ids (B, T): documents of `doc_len` tokens packed back to back, as
    the packed data of data.document_mask=true gives them."""
    B, T = batch["input_ids"].shape
    ids = (torch.arange(T, device=batch["input_ids"].device) // doc_len).expand(B, T)  # (B, T)
    return {**batch, "document_ids": ids.contiguous()}


def build_arms(
    names: list[str],
    *,
    shape: list[str],
    batch: int,
    seq_len: int,
    doc_len: int,
    device: torch.device,
    seed: int = 0,
    arms: dict[str, list[str]] | None = None,
) -> list[Arm]:
    """Every arm named, each composed, checked and built from the same seed."""
    table = ARMS if arms is None else arms
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ConfigError(f"unknown arm {unknown[0]!r}: choose from {', '.join(table)}")
    parts = {n: arm_parts(table[n], shape) for n in names}  # every refusal before any build
    built = []
    for name in names:
        model, task, optim, document_mask = parts[name]
        work = Workload(model=model, batch=batch, seq_len=seq_len, device=device)
        torch.manual_seed(seed)
        subject = ZooSubject(work, task=task, optim=optim)
        data = work.training_batch(seed)
        built.append(Arm(name, table[name], subject, with_documents(data, doc_len) if document_mask else data))
    return built


def time_arms(arms: list[Arm], *, rounds: int, steps: int, device: torch.device) -> dict[str, list[float]]:
    """Seconds per training step of each arm, one list entry per interleaved round."""

    def case(arm: Arm) -> Callable[[], float]:
        def train() -> None:
            for _ in range(steps):
                arm.subject.train_step(arm.batch)

        return lambda: timed(train, steps, device)

    return interleaved({arm.name: case(arm) for arm in arms}, rounds=rounds, warmup=1)


def memory_of(arm: Arm) -> dict[str, int]:
    """What one training step of the arm holds beyond the time it takes, counted, not sampled:
    `saved_bytes`, the bytes autograd keeps for the backward (each storage once, the parameters'
    own storages left out: they are `param_bytes`), and `param_bytes`, the parameters (the
    optimizer's state is a fixed multiple of them: AdamW 2×, Muon 1× on its matrices)."""
    weights = list(arm.subject.task.parameters())  # the model and any module the task adds (MTP)
    params = {p.untyped_storage().data_ptr() for p in weights}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        arm.subject.train_step(arm.batch)
    return {
        "saved_bytes": sum(saved.values()),
        "param_bytes": sum(p.numel() * p.element_size() for p in weights),
    }


def rows_of(
    seconds: dict[str, list[float]], arms: list[Arm], tokens_per_step: int, memory: dict[str, dict] | None = None
) -> list[dict]:
    """Median tokens/s, spread and the ratio to the first arm's median, one row per arm; with
    `memory` (memory_of per arm) also the saved bytes and parameters beside the first arm's."""
    base = median(seconds[arms[0].name])
    mem = memory or {}
    first = mem.get(arms[0].name)
    return [
        {
            "arm": a.name,
            "overrides": a.overrides,
            "tokens_per_s": tokens_per_step / median(seconds[a.name]),
            "step_ms": 1e3 * median(seconds[a.name]),
            "spread": spread(seconds[a.name]),
            "ratio": base / median(seconds[a.name]),
            "seconds": seconds[a.name],
            **(
                {
                    **mem[a.name],
                    "saved_ratio": mem[a.name]["saved_bytes"] / first["saved_bytes"],
                    "param_ratio": mem[a.name]["param_bytes"] / first["param_bytes"],
                }
                if a.name in mem and first
                else {}
            ),
        }
        for a in arms
    ]


def markdown(rows: list[dict]) -> str:
    memory = all("saved_ratio" in r for r in rows)
    head = "| option | tokens/s vs baseline | training tokens/s | spread |"
    out = [
        head + (" saved for backward vs baseline | parameters vs baseline |" if memory else ""),
        "|---|---|---|---|" + ("---|---|" if memory else ""),
    ]
    for r in rows:
        line = f"| `{r['arm']}` | {r['ratio']:.2f} × | {r['tokens_per_s']:,.0f} | {r['spread']:.0%} |"
        if memory:
            line += f" {r['saved_ratio']:.2f} × | {r['param_ratio']:.2f} × |"
        out.append(line)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", default=",".join(ARMS), help="comma-separated arm names (the first is the base)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2, help="training steps per arm per round")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--doc-len", type=int, default=64, help="data.document_mask: tokens per document")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        help="a model override of the baseline (repeatable), e.g. --model model.d_model=128",
    )
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    load_before = os.getloadavg()[0]  # other work on the machine: said beside the figures
    names = [n.strip() for n in args.arms.split(",") if n.strip()]
    arms = build_arms(
        names, shape=args.model, batch=args.batch, seq_len=args.seq_len, doc_len=args.doc_len, device=device
    )
    print(f"options_cost: {len(arms)} arms x {args.rounds} rounds x {args.steps} steps", file=sys.stderr)
    memory = {arm.name: memory_of(arm) for arm in arms}  # one counted step each, before the timing
    seconds = time_arms(arms, rounds=args.rounds, steps=args.steps, device=device)
    rows = rows_of(seconds, arms, args.batch * args.seq_len, memory)
    print(markdown(rows))
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "machine": {
            "device": _device_name(device),
            "cpus": os.cpu_count(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        },
        "workload": {
            "model_overrides": args.model,
            "batch": args.batch,
            "seq_len": args.seq_len,
            "doc_len": args.doc_len,
            "rounds": args.rounds,
            "steps_per_round": args.steps,
            "params": sum(p.numel() for p in arms[0].subject.model.parameters()),
        },
        "rows": rows,
    }
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    try:
        main()
    except ConfigError as exc:  # a bad arm, said on one line before any timing
        sys.exit(f"options_cost: {exc}")
