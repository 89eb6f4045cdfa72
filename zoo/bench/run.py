"""One benchmark run: build every (system, variant), time them in interleaved rounds, measure
peak memory in fresh processes, and collect figures, ratios and the device's matmul throughput
into plain data."""

from __future__ import annotations

import dataclasses
import platform
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from zoo.bench.fit import fit_seconds_per_step
from zoo.bench.matmul import matmul_flops_per_s
from zoo.bench.memory import peak_training_memory
from zoo.bench.peers import PEERS, PeerUnavailable
from zoo.bench.subjects import build_subject
from zoo.bench.timing import interleaved, median, spread, timed
from zoo.bench.workload import Workload
from zoo.config.model import ModelConfig
from zoo.config.errors import ConfigError
from zoo.models.summary import summarize

VARIANTS = ("eager", "compile", "bf16", "bf16-compile", "checkpoint")
MEASURES = ("train", "forward", "generate", "fit", "memory")
PEER_VARIANTS = ("eager", "compile", "bf16", "bf16-compile")  # checkpointing is a zoo switch; peers run as they come

# named shapes: model overrides and the batch they are measured at (batch × seq_len tokens a step)
SHAPES = {
    "reference": ([], {}),  # the default model at the options' batch and seq_len: the CPU reference
    "gpt2-small": (["model=gpt", "model.d_model=768", "model.n_heads=12", "model.n_layers=12",
                    "model.vocab_size=50304", "model.max_seq_len=1024"], {"batch": 16, "seq_len": 1024}),
    "llama-250m": (["model=llama", "model.d_model=1024", "model.n_heads=16", "model.n_kv_heads=4",
                    "model.n_layers=16", "model.d_ff=2816", "model.vocab_size=32000", "model.max_seq_len=1024"],
                   {"batch": 8, "seq_len": 1024}),
}


def is_bf16(variant: str) -> bool:
    return variant.startswith("bf16")


def is_compiled(variant: str) -> bool:
    return variant.endswith("compile")


@dataclass(kw_only=True)
class BenchOptions:
    batch: int = field(default=8, metadata={"help": "rows per training batch"})
    seq_len: int = field(default=256, metadata={"help": "tokens per row"})
    threads: int = field(default=2, metadata={"help": "torch intra-op threads (0: torch's default)"})
    rounds: int = field(default=5, metadata={"help": "interleaved timed rounds; medians are reported"})
    steps: int = field(default=2, metadata={"help": "training steps per case per round"})
    peers: str = field(default="hf,x-transformers",
                       metadata={"help": "comma-separated of hf, x-transformers, litgpt; or none"})
    shape: str = field(default="reference",
                       metadata={"help": "reference (the model given), gpt2-small (124M, batch 16 x 1024) or "
                                 "llama-250m (GQA, SwiGLU, batch 8 x 1024): model overrides and batch; "
                                 "later model.* overrides and batch= / seq_len= win"})
    variants: str = field(default="eager,compile,bf16",
                          metadata={"help": "of eager, compile, bf16, bf16-compile (bf16 autocast and "
                                    "torch.compile: what GPU users run), checkpoint"})
    measure: str = field(default="train,forward,generate,fit,memory",
                         metadata={"help": "of train, forward, generate, fit, memory"})
    prompt: int = field(default=32, metadata={"help": "generation: prompt tokens"})
    new_tokens: int = field(default=256, metadata={"help": "generation: new tokens (greedy, cached)"})
    gen_batch: int = field(default=8, metadata={"help": "generation: rows of the batched case"})
    memory_seq_len: Optional[int] = field(default=None, metadata={"help": "memory: context (default seq_len)"})
    memory_rounds: int = field(default=3, metadata={"help": "memory: fresh processes per system; median"})
    device: str = field(default="auto", metadata={"help": "cpu, cuda or auto"})
    seed: int = field(default=0, metadata={"help": "seed of the weights and batches"})

    def __post_init__(self) -> None:
        for name in ("batch", "seq_len", "rounds", "steps", "prompt", "new_tokens", "gen_batch", "memory_rounds"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.threads < 0:
            raise ConfigError(f"threads must be >= 0, got {self.threads}")
        self.peer_list = _choices("peers", self.peers, tuple(PEERS), allow_none=True)
        self.variant_list = _choices("variants", self.variants, VARIANTS)
        self.measure_list = _choices("measure", self.measure, MEASURES)
        if self.shape not in SHAPES:
            raise ConfigError(f"shape={self.shape!r}: choose from {', '.join(SHAPES)}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"device must be auto, cpu or cuda, got {self.device!r}")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ConfigError("device=cuda, but torch sees no CUDA device")

    @property
    def torch_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)


def _choices(key: str, value: str, allowed: tuple[str, ...], allow_none: bool = False) -> list[str]:
    if allow_none and value.strip() in ("", "none"):
        return []
    items = [v.strip() for v in str(value).split(",") if v.strip()]
    bad = [v for v in items if v not in allowed]
    if bad or not items:
        raise ConfigError(f"{key}={value!r}: choose from {', '.join(allowed)}"
                          + (" (or none)" if allow_none else ""))
    return items


@dataclass
class Case:
    system: str  # "zoo", "hf", "x-transformers"
    variant: str
    subject: object
    name: str


def run_bench(model: ModelConfig, opts: BenchOptions, log: Callable[[str], None] = print) -> dict:
    if opts.threads:
        torch.set_num_threads(opts.threads)
    device = opts.torch_device
    if opts.seq_len > model.max_seq_len:
        raise ConfigError(f"seq_len={opts.seq_len} is longer than model.max_seq_len={model.max_seq_len}")
    if "generate" in opts.measure_list and opts.prompt + opts.new_tokens > model.max_seq_len:
        # the prompt and its continuation must fit the position table (learned positions); a
        # longer table changes nothing else, so every measurement uses the same model
        model = dataclasses.replace(model, max_seq_len=opts.prompt + opts.new_tokens)
    base = Workload(model=model, batch=opts.batch, seq_len=opts.seq_len, device=device)
    work = {v: dataclasses.replace(base, bf16=is_bf16(v)) for v in opts.variant_list}

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

    rows = {c.name: {"system": c.system, "name": c.subject.name, "variant": c.variant} for c in cases}
    batch = base.training_batch(opts.seed)
    tokens = base.tokens_per_step

    if "train" in opts.measure_list or "fit" in opts.measure_list:
        timers: dict[str, Callable[[], float]] = {}
        if "train" in opts.measure_list:
            for c in cases:
                timers[c.name] = lambda c=c: timed(lambda: [c.subject.train_step(batch) for _ in range(opts.steps)],
                                                   opts.steps, device)
        if "fit" in opts.measure_list:
            for c in cases:
                if c.system == "zoo" and c.variant in ("eager", "bf16"):  # fit: zoo-train's loop, eager
                    w = work[c.variant]
                    timers[f"{c.name} fit"] = lambda w=w: fit_seconds_per_step(w, max(opts.steps, 3))
        log(f"training: {len(timers)} cases x {opts.rounds} rounds")
        seconds = interleaved(timers, rounds=opts.rounds, warmup=1)
        for name, values in seconds.items():
            key, what = (name[:-4], "fit") if name.endswith(" fit") else (name, "train")
            rows[key][f"{what}_tokens_per_s"] = tokens / median(values)
            rows[key][f"{what}_step_ms"] = 1e3 * median(values)
            rows[key][f"{what}_spread"] = spread(values)

    if "forward" in opts.measure_list:
        timers = {c.name: (lambda c=c: timed(lambda: c.subject.forward(batch), 1, device)) for c in cases
                  if c.variant != "checkpoint"}
        log(f"forward: {len(timers)} cases x {opts.rounds} rounds")
        for name, values in interleaved(timers, rounds=opts.rounds, warmup=1).items():
            rows[name]["forward_ms"] = 1e3 * median(values)

    if "generate" in opts.measure_list:
        timers = {}
        for c in cases:
            if c.variant == "checkpoint" or c.subject.generate(base.prompt(1, opts.prompt), 2) is None:
                continue
            for rows_n in (1, opts.gen_batch):
                prompt = base.prompt(rows_n, opts.prompt)
                timers[(c.name, rows_n)] = lambda c=c, p=prompt: timed(
                    lambda: _check_length(c.subject.generate(p, opts.new_tokens), opts.new_tokens, c.name),
                    opts.new_tokens * p.shape[0], device)
        log(f"generate: {len(timers)} cases x {opts.rounds} rounds")
        for (name, rows_n), values in interleaved(timers, rounds=opts.rounds, warmup=1).items():
            key = "generate_tokens_per_s_batch1" if rows_n == 1 else f"generate_tokens_per_s_batch{rows_n}"
            rows[name][key] = 1 / median(values)

    if "memory" in opts.measure_list:
        mem_len = opts.memory_seq_len or opts.seq_len
        for c in cases:
            if is_compiled(c.variant):
                continue  # compiling in each fresh process would dominate; memory is eager's
            mem_model = dataclasses.replace(_variant_model(model, c.variant),
                                            max_seq_len=max(model.max_seq_len, mem_len))
            spec = {"model": mem_model.to_dict(), "batch": opts.batch, "seq_len": mem_len,
                    "device": device.type, "bf16": is_bf16(c.variant), "system": c.system,
                    "threads": opts.threads}
            log(f"memory: {c.name} at context {mem_len}")
            measured = [peak_training_memory(spec) for _ in range(opts.memory_rounds)]
            values = [m["training_bytes"] / 2 ** 20 for m in measured]
            rows[c.name]["memory_mb"] = median(values)  # the allocator makes single runs vary
            rows[c.name]["memory_mb_rounds"] = values
            rows[c.name]["memory_kind"] = measured[0]["kind"]
            rows[c.name]["memory_seq_len"] = mem_len

    summary = summarize(cases[0].subject.model, opts.seq_len)
    train_flops_per_step = 3 * summary.flops_per_token * opts.batch * opts.seq_len
    peaks = {}
    if "train" in opts.measure_list:
        dtypes = {"float32": torch.float32,
                  **({"bfloat16": torch.bfloat16} if any(map(is_bf16, opts.variant_list)) else {})}
        peaks = {name: matmul_flops_per_s(dt, device, rounds=opts.rounds) for name, dt in dtypes.items()}
        for row in rows.values():
            if "train_step_ms" in row:
                peak = peaks["bfloat16" if is_bf16(row["variant"]) else "float32"]
                row["model_flops_per_s"] = train_flops_per_step / (row["train_step_ms"] / 1e3)
                row["mfu"] = row["model_flops_per_s"] / peak
    return {
        "machine": {"device": _device_name(device), "torch": torch.__version__, "threads": torch.get_num_threads(),
                    "python": platform.python_version()},
        "workload": {"model": model.to_dict(), "batch": opts.batch, "seq_len": opts.seq_len,
                     "tokens_per_step": tokens, "rounds": opts.rounds, "steps_per_round": opts.steps,
                     "prompt": opts.prompt, "new_tokens": opts.new_tokens, "gen_batch": opts.gen_batch},
        "model_summary": summary.as_dict(),
        "train_flops_per_step": train_flops_per_step,
        "matmul_flops_per_s": peaks,
        "rows": list(rows.values()),
        "ratios": ratios(list(rows.values()), opts.gen_batch),
        "unavailable": unavailable,
    }


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
    """The comparisons the README's targets are stated in, where both sides were measured."""
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
        put(f"generate batch {n}: zoo / hf, both bf16 compiled", get("zoo", "bf16-compile", g), get("hf", "bf16-compile", g))
    put("forward: hf / zoo latency", get("hf", "eager", "forward_ms"), get("zoo", "eager", "forward_ms"))
    m = "memory_mb"
    put("memory: checkpoint / eager", get("zoo", "checkpoint", m), get("zoo", "eager", m))
    return out
