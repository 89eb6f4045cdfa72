"""One benchmark run: build every (system, variant), time them in interleaved rounds, measure
peak memory in fresh processes, and collect figures, ratios and the device's matmul throughput
into plain data."""

from __future__ import annotations

import dataclasses
import platform
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from zoo.bench.bandwidth import copy_bytes_per_s, weight_bytes
from zoo.bench.decode import decode_by_context
from zoo.bench.fit import fit_seconds_per_step
from zoo.bench.matmul import matmul_flops_per_s
from zoo.bench.memory import peak_training_memory
from zoo.bench.options import (  # noqa: F401  (re-exported)
    MEASURES,
    PEER_VARIANTS,
    SHAPES,
    VARIANTS,
    BenchOptions,
    is_bf16,
    is_compiled,
)
from zoo.bench.peers import PEERS, PeerUnavailable
from zoo.bench.subjects import build_subject
from zoo.bench.timing import interleaved, median, spread, timed
from zoo.bench.workload import Subject, Workload
from zoo.bench.zoo_subject import ZooSubject
from zoo.config.errors import ConfigError
from zoo.config.facts.families import FAMILY_FACTS
from zoo.config.schema.model import ModelConfig
from zoo.models.summary import summarize


@dataclass
class Case:
    system: str  # "zoo", "hf", "x-transformers"
    variant: str
    subject: Subject
    name: str


def run_bench(model: ModelConfig, opts: BenchOptions, log: Callable[[str], None] = print) -> dict:
    """Build every (system, variant), take each measurement `opts` asks for in interleaved
    rounds, and return the figures, ratios and the machine as plain data. The process's thread
    count is put back after (a caller's later runs keep theirs)."""
    before = torch.get_num_threads()
    try:
        return _run_bench(model, opts, log)
    finally:
        torch.set_num_threads(before)


def _run_bench(model: ModelConfig, opts: BenchOptions, log: Callable[[str], None]) -> dict:
    if opts.threads:
        torch.set_num_threads(opts.threads)
    device = opts.torch_device
    if opts.seq_len > model.max_seq_len:
        raise ConfigError(
            f"seq_len={opts.seq_len} is longer than model.max_seq_len={model.max_seq_len}: lower "
            f"seq_len or raise model.max_seq_len={opts.seq_len}"
        )
    if "generate" in opts.measure_list and opts.prompt + opts.new_tokens > model.max_seq_len:
        # the prompt and its continuation must fit the position table (learned positions); a
        # longer table changes nothing else, so every measurement uses the same model
        model = dataclasses.replace(model, max_seq_len=opts.prompt + opts.new_tokens)
    if "decode" in opts.measure_list:
        if not FAMILY_FACTS[model.family].prompt_in_decoder:
            raise ConfigError(
                f"measure=decode times a decoder-only model continuing prompts; model.family={model.family.value} "
                f"is not one"
            )
        longest = max(opts.context_list) + opts.new_tokens
        if longest > model.max_seq_len:  # as for generate: only the position table grows
            model = dataclasses.replace(model, max_seq_len=longest)
    base = Workload(model=model, batch=opts.batch, seq_len=opts.seq_len, device=device)
    work = {v: dataclasses.replace(base, bf16=is_bf16(v)) for v in opts.variant_list}
    cases, unavailable = _build_cases(model, opts, work, log)
    rows = {c.name: {"system": c.system, "name": c.subject.name, "variant": c.variant} for c in cases}
    measures = opts.measure_list
    if "train" in measures or "fit" in measures:
        _time_training(cases, rows, base, work, opts, log)
    if "forward" in measures:
        _time_forward(cases, rows, base, opts, log)
    bandwidth = None
    if "generate" in measures:
        bandwidth = _time_generation(cases, rows, base, opts, log)
    if "memory" in measures:
        _measure_memory(cases, rows, model, opts, log)
    if "decode" in measures:
        _time_decoding(cases, rows, opts, log)
    first = cases[0].subject  # the first variant's zoo model: every case's model has its shape
    assert isinstance(first, ZooSubject)
    summary = summarize(first.model, opts.seq_len)
    train_flops_per_step = 3 * summary.flops_per_token * opts.batch * opts.seq_len
    peaks = _add_mfu(rows, train_flops_per_step, opts) if "train" in measures else {}
    return {
        "machine": {
            "device": _device_name(device),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "python": platform.python_version(),
        },
        "workload": {
            "model": model.to_dict(),
            "batch": opts.batch,
            "seq_len": opts.seq_len,
            "tokens_per_step": base.tokens_per_step,
            "rounds": opts.rounds,
            "steps_per_round": opts.steps,
            "prompt": opts.prompt,
            "new_tokens": opts.new_tokens,
            "gen_batch": opts.gen_batch,
            "contexts": opts.context_list,
        },
        "model_summary": summary.as_dict(),
        "train_flops_per_step": train_flops_per_step,
        "matmul_flops_per_s": peaks,
        "memory_bytes_per_s": bandwidth,
        "rows": list(rows.values()),
        "ratios": ratios(list(rows.values()), opts.gen_batch),
        "unavailable": unavailable,
    }


def _build_cases(
    model: ModelConfig, opts: BenchOptions, work: dict[str, Workload], log: Callable[[str], None]
) -> tuple[list[Case], dict[str, str]]:
    """zoo in every variant, and each peer in the variants peers run; (cases, peer -> why it
    could not be built)."""
    cases: list[Case] = []
    unavailable: dict[str, str] = {}
    for variant in opts.variant_list:
        w = work[variant]
        torch.manual_seed(opts.seed)
        zoo_model = _variant_model(model, variant)
        zoo = build_subject("zoo", dataclasses.replace(w, model=zoo_model), compile=is_compiled(variant))
        cases.append(Case("zoo", variant, zoo, f"zoo {variant}"))
        if variant not in PEER_VARIANTS:
            continue
        for peer in opts.peer_list:
            try:
                subject = build_subject(peer, w, compile=is_compiled(variant), zoo=zoo)
            except PeerUnavailable as exc:
                unavailable[peer] = str(exc)
                continue
            cases.append(Case(peer, variant, subject, f"{subject.name} {variant}"))
        log(f"built {variant}: {', '.join(c.name for c in cases if c.variant == variant)}")
    return cases, unavailable


def _time_training(
    cases: list[Case],
    rows: dict,
    base: Workload,
    work: dict[str, Workload],
    opts: BenchOptions,
    log: Callable[[str], None],
) -> None:
    """Training steps of every case (`train`) and zoo-train's own loop (`fit`, eager), interleaved."""
    batch, device = base.training_batch(opts.seed), base.device
    timers: dict[str, Callable[[], float]] = {}
    if "train" in opts.measure_list:
        for c in cases:
            timers[c.name] = _training_timer(c.subject, batch, opts.steps, device)
    if "fit" in opts.measure_list:
        for c in cases:
            if c.system == "zoo" and c.variant in ("eager", "bf16"):  # fit: zoo-train's loop, eager
                w = work[c.variant]
                timers[f"{c.name} fit"] = partial(fit_seconds_per_step, w, max(opts.steps, 3))
    log(f"training: {len(timers)} cases x {opts.rounds} rounds")
    for name, values in interleaved(timers, rounds=opts.rounds, warmup=1).items():
        key, what = (name[:-4], "fit") if name.endswith(" fit") else (name, "train")
        rows[key][f"{what}_tokens_per_s"] = base.tokens_per_step / median(values)
        rows[key][f"{what}_step_ms"] = 1e3 * median(values)
        rows[key][f"{what}_spread"] = spread(values)


def _training_timer(subject: Subject, batch: dict, steps: int, device: torch.device) -> Callable[[], float]:
    """Seconds per step of `steps` training steps of `subject` on `batch`."""

    def train() -> None:
        for _ in range(steps):
            subject.train_step(batch)

    return lambda: timed(train, steps, device)


def _time_forward(
    cases: list[Case], rows: dict, base: Workload, opts: BenchOptions, log: Callable[[str], None]
) -> None:
    batch = base.training_batch(opts.seed)
    timers = {
        c.name: (lambda c=c: timed(lambda: c.subject.forward(batch), 1, base.device))
        for c in cases
        if c.variant != "checkpoint"
    }
    log(f"forward: {len(timers)} cases x {opts.rounds} rounds")
    for name, values in interleaved(timers, rounds=opts.rounds, warmup=1).items():
        rows[name]["forward_ms"] = 1e3 * median(values)


def _time_generation(
    cases: list[Case], rows: dict, base: Workload, opts: BenchOptions, log: Callable[[str], None]
) -> float:
    """Decoding exactly `new_tokens` at batch 1 and at `gen_batch`, for every case that generates;
    then the device's memory bandwidth (returned), and each batch-1 figure as a share of its
    limit: tokens/s × the weights' bytes (`zoo.bench.bandwidth.weight_bytes`) / bandwidth."""
    timers = {}
    for c in cases:
        if c.variant == "checkpoint" or c.subject.generate(base.prompt(1, opts.prompt), 2) is None:
            continue
        for rows_n in (1, opts.gen_batch):
            prompt = base.prompt(rows_n, opts.prompt)
            timers[(c.name, rows_n)] = lambda c=c, p=prompt: timed(
                lambda: _check_length(c.subject.generate(p, opts.new_tokens), opts.new_tokens, c.name),
                opts.new_tokens * p.shape[0],
                base.device,
            )
    log(f"generate: {len(timers)} cases x {opts.rounds} rounds")
    for (name, rows_n), values in interleaved(timers, rounds=opts.rounds, warmup=1).items():
        key = "generate_tokens_per_s_batch1" if rows_n == 1 else f"generate_tokens_per_s_batch{rows_n}"
        rows[name][key] = 1 / median(values)
    bandwidth = copy_bytes_per_s(base.device, rounds=opts.rounds)
    for c in cases:
        row = rows[c.name]
        if "generate_tokens_per_s_batch1" in row:
            row["weight_bytes"] = weight_bytes(c.subject.model, is_bf16(c.variant))
            row["generate_bandwidth_share"] = row["generate_tokens_per_s_batch1"] * row["weight_bytes"] / bandwidth
    return bandwidth


def _time_decoding(cases: list[Case], rows: dict, opts: BenchOptions, log: Callable[[str], None]) -> None:
    """Batch-1 greedy decoding at each of `contexts` (`zoo.bench.decode`), for zoo's float32
    cases, interleaved (a checkpointing variant decodes as eager does; bf16 is said and left out:
    the torch-free cache count takes one element size)."""
    zoo = {c.name: c.subject for c in cases if isinstance(c.subject, ZooSubject) and c.variant in ("eager", "compile")}
    left = [c.name for c in cases if c.system == "zoo" and c.name not in zoo and c.variant != "checkpoint"]
    if left:
        log(f"decode: {', '.join(left)} not measured (float32 variants only: eager, compile)")
    if not zoo:
        return
    figures = decode_by_context(
        {name: s.model for name, s in zoo.items()},
        contexts=opts.context_list,
        new_tokens=opts.new_tokens,
        rounds=opts.rounds,
        configs={name: s.generation for name, s in zoo.items()},
        log=log,
    )
    for name, by_context in figures.items():
        rows[name]["decode"] = by_context


def _measure_memory(
    cases: list[Case], rows: dict, model: ModelConfig, opts: BenchOptions, log: Callable[[str], None]
) -> None:
    """Peak training memory of every eager case, each round in a fresh process."""
    mem_len = opts.memory_seq_len or opts.seq_len
    for c in cases:
        if is_compiled(c.variant):
            continue  # compiling in each fresh process would dominate; memory is eager's
        mem_model = dataclasses.replace(_variant_model(model, c.variant), max_seq_len=max(model.max_seq_len, mem_len))
        spec = {
            "model": mem_model.to_dict(),
            "batch": opts.batch,
            "seq_len": mem_len,
            "device": opts.torch_device.type,
            "bf16": is_bf16(c.variant),
            "system": c.system,
            "threads": opts.threads,
        }
        log(f"memory: {c.name} at context {mem_len}")
        measured = [peak_training_memory(spec) for _ in range(opts.memory_rounds)]
        values = [m["training_bytes"] / 2**20 for m in measured]
        rows[c.name]["memory_mb"] = median(values)  # the allocator makes single runs vary
        rows[c.name]["memory_mb_rounds"] = values
        rows[c.name]["memory_kind"] = measured[0]["kind"]
        rows[c.name]["memory_seq_len"] = mem_len


def _add_mfu(rows: dict, train_flops_per_step: float, opts: BenchOptions) -> dict[str, float]:
    """Model FLOP/s and MFU of each timed training row, against this device's measured matmul
    throughput in the row's dtype; returns those throughputs."""
    device = opts.torch_device
    dtypes = {
        "float32": torch.float32,
        **({"bfloat16": torch.bfloat16} if any(map(is_bf16, opts.variant_list)) else {}),
    }
    peaks = {name: matmul_flops_per_s(dt, device, rounds=opts.rounds) for name, dt in dtypes.items()}
    for row in rows.values():
        if "train_step_ms" in row:
            peak = peaks["bfloat16" if is_bf16(row["variant"]) else "float32"]
            row["model_flops_per_s"] = train_flops_per_step / (row["train_step_ms"] / 1e3)
            row["mfu"] = row["model_flops_per_s"] / peak
    return peaks


def _variant_model(model: ModelConfig, variant: str) -> ModelConfig:
    if variant != "checkpoint":
        return model
    return dataclasses.replace(model, checkpoint_activations=True)


def _check_length(out: torch.Tensor, n: int, name: str) -> torch.Tensor:
    if out.shape[1] != n:
        raise RuntimeError(f"{name} generated {out.shape[1]} tokens, not {n}")
    return out


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        model = ""
    return f"cpu {model or platform.processor()}".strip()


def ratios(rows: list[dict], gen_batch: int) -> dict:
    """The comparisons docs/performance.md states its targets in, where both sides were measured."""

    def get(system, variant, key):
        return next((r[key] for r in rows if r["system"] == system and r["variant"] == variant and key in r), None)

    def best_peer(variant, key):
        values = [r[key] for r in rows if r["system"] != "zoo" and r["variant"] == variant and key in r]
        return max(values) if values else None

    out = {}

    def put(name, a, b):
        if a is not None and b is not None and b > 0:
            out[name] = a / b

    t = "train_tokens_per_s"
    put("train eager: zoo / fastest peer", get("zoo", "eager", t), best_peer("eager", t))
    for peer in PEERS:
        put(f"train eager: zoo / {peer}", get("zoo", "eager", t), get(peer, "eager", t))
    put("train compile: zoo / hf", get("zoo", "compile", t), get("hf", "compile", t))
    put("train compile: zoo / fastest peer", get("zoo", "compile", t), best_peer("compile", t))
    put("train bf16: zoo bf16 / zoo float32", get("zoo", "bf16", t), get("zoo", "eager", t))
    put("train bf16: zoo / hf", get("zoo", "bf16", t), get("hf", "bf16", t))
    put("train bf16: zoo / fastest peer", get("zoo", "bf16", t), best_peer("bf16", t))
    put("train bf16-compile: zoo / hf", get("zoo", "bf16-compile", t), get("hf", "bf16-compile", t))
    put("train bf16-compile: zoo / fastest peer", get("zoo", "bf16-compile", t), best_peer("bf16-compile", t))
    put("fit / bare step (eager)", get("zoo", "eager", "fit_tokens_per_s"), get("zoo", "eager", t))
    put("fit / bare step (bf16)", get("zoo", "bf16", "fit_tokens_per_s"), get("zoo", "bf16", t))
    for n in (1, gen_batch):
        g = f"generate_tokens_per_s_batch{n}"
        put(f"generate batch {n}: zoo / hf", get("zoo", "eager", g), get("hf", "eager", g))
        put(f"generate batch {n}: zoo / fastest peer", get("zoo", "eager", g), best_peer("eager", g))
        put(f"generate batch {n}: zoo compiled static step / hf eager", get("zoo", "compile", g), get("hf", "eager", g))
        put(f"generate batch {n}: zoo / hf, both compiled", get("zoo", "compile", g), get("hf", "compile", g))
        for variant in ("compile", "bf16-compile"):
            put(
                f"generate batch {n}: zoo / gpt-fast-style, both {variant}",
                get("zoo", variant, g),
                get("gpt-fast", variant, g),
            )
        put(
            f"generate batch {n}: zoo / hf, both bf16 compiled",
            get("zoo", "bf16-compile", g),
            get("hf", "bf16-compile", g),
        )
    put("forward: hf / zoo latency", get("hf", "eager", "forward_ms"), get("zoo", "eager", "forward_ms"))
    m = "memory_mb"
    put("memory: checkpoint / eager", get("zoo", "checkpoint", m), get("zoo", "eager", m))
    return out
