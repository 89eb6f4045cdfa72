"""zoo-bench's options (`BenchOptions`), its named shapes, variants and measures: torch-free, so
`zoo-bench --help` and a bad option answer before torch loads."""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.config.errors import ConfigError
from zoo.config.schema.convert import check_seed

PEER_NAMES = (
    "hf",
    "x-transformers",
    "litgpt",
    "gpt-fast",
)  # the keys of zoo.bench.peers.PEERS (a test keeps them equal)
PEER_MODULES = {  # what each imports (gpt-fast-style decoding is written in zoo: torch alone)
    "hf": "transformers",
    "x-transformers": "x_transformers",
    "litgpt": "litgpt",
    "gpt-fast": "torch",
}
VARIANTS = ("eager", "compile", "bf16", "bf16-compile", "checkpoint")
MAX_THREADS = 4096  # torch.set_num_threads takes a C int; no machine has more cores
MEASURES = ("train", "forward", "generate", "fit", "memory", "decode")
PEER_VARIANTS = ("eager", "compile", "bf16", "bf16-compile")  # checkpointing is a zoo switch; peers run as they come

# named shapes: model overrides and the batch they are measured at (batch × seq_len tokens a step)
SHAPES = {
    "reference": ([], {}),  # the default model at the options' batch and seq_len: the CPU reference
    "gpt2-small": (
        [
            "model=gpt",
            "model.d_model=768",
            "model.n_heads=12",
            "model.n_layers=12",
            "model.vocab_size=50304",
            "model.max_seq_len=1024",
        ],
        {"batch": 16, "seq_len": 1024},
    ),
    "llama-250m": (
        [
            "model=llama",
            "model.d_model=1024",
            "model.n_heads=16",
            "model.n_kv_heads=4",
            "model.n_layers=16",
            "model.d_ff=2816",
            "model.vocab_size=32000",
            "model.max_seq_len=1024",
        ],
        {"batch": 8, "seq_len": 1024},
    ),
    "llama-1b": (  # Llama 3.2 1B's shape (16 layers of 2048, GQA 32/8, SwiGLU 8192) at Llama 2's vocabulary
        [
            "model=llama",
            "model.d_model=2048",
            "model.n_heads=32",
            "model.n_kv_heads=8",
            "model.n_layers=16",
            "model.d_ff=8192",
            "model.vocab_size=32000",
            "model.max_seq_len=2048",
        ],
        {"batch": 4, "seq_len": 2048},
    ),
}


def missing_peers(peers: list[str]) -> list[str]:
    """The peers asked for whose library is not installed, found without importing anything
    (an import of transformers takes seconds): said before any measurement starts."""
    import importlib.util

    missing = []
    for peer in peers:
        try:
            found = importlib.util.find_spec(PEER_MODULES[peer]) is not None
        except (ImportError, ValueError):  # a module blocked or broken: not usable either
            found = False
        if not found:
            missing.append(peer)
    return missing


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
    peers: str = field(
        default="hf,x-transformers",
        metadata={"help": "comma-separated of hf, x-transformers, litgpt, gpt-fast; or none"},
    )
    shape: str = field(
        default="reference",
        metadata={
            "help": "reference (the model given), gpt2-small (124M, batch 16 x 1024), "
            "llama-250m (GQA, SwiGLU, batch 8 x 1024) or llama-1b (1.1B, batch 4 x 2048): model overrides and batch; "
            "later model.* overrides and batch= / seq_len= win"
        },
    )
    variants: str = field(
        default="eager,compile,bf16",
        metadata={
            "help": "of eager, compile, bf16, bf16-compile (bf16 autocast and "
            "torch.compile: what GPU users run), checkpoint"
        },
    )
    measure: str = field(
        default="train,forward,generate,fit,memory",
        metadata={"help": "of train, forward, generate, fit, memory, decode (by context: contexts=)"},
    )
    prompt: int = field(default=32, metadata={"help": "generation: prompt tokens"})
    new_tokens: int = field(default=256, metadata={"help": "generation: new tokens (greedy, cached)"})
    gen_batch: int = field(default=8, metadata={"help": "generation: rows of the batched case"})
    memory_seq_len: int | None = field(default=None, metadata={"help": "memory: context (default seq_len)"})
    memory_rounds: int = field(default=3, metadata={"help": "memory: fresh processes per system; median"})
    device: str = field(default="auto", metadata={"help": "cpu, cuda or auto"})
    seed: int = field(default=0, metadata={"help": "seed of the weights and batches"})
    contexts: str = field(
        default="256,1024,2048",
        metadata={"help": "decode: comma-separated prompt lengths; at each, batch-1 greedy decoding of new_tokens"},
    )

    def __post_init__(self) -> None:
        for name in ("batch", "seq_len", "rounds", "steps", "prompt", "new_tokens", "gen_batch", "memory_rounds"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.threads <= MAX_THREADS:
            raise ConfigError(f"threads must be from 0 to {MAX_THREADS}, got {self.threads}")
        check_seed(self.seed, "seed")
        self.peer_list = _choices("peers", self.peers, PEER_NAMES, allow_none=True)
        self.variant_list = _choices("variants", self.variants, VARIANTS)
        self.measure_list = _choices("measure", self.measure, MEASURES)
        if self.shape not in SHAPES:
            raise ConfigError(f"shape={self.shape!r}: choose from {', '.join(SHAPES)}")
        self.context_list = parse_contexts(self.contexts)
        if "decode" in self.measure_list and self.new_tokens < 2:
            raise ConfigError(
                f"measure=decode times the steps after the first new token: new_tokens must be >= 2, got {self.new_tokens}"
            )
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"device must be auto, cpu or cuda, got {self.device!r}")
        if self.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise ConfigError("device=cuda, but torch sees no CUDA device")

    @property
    def torch_device(self):
        import torch

        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)


def parse_contexts(value: str) -> list[int]:
    """contexts=256,1024,2048 -> [256, 1024, 2048]: distinct positive prompt lengths, in the
    order given (the decode measure's table keeps it)."""
    items = [v.strip() for v in str(value).split(",") if v.strip()]
    try:
        lengths = [int(v) for v in items]
    except ValueError:
        lengths = []
    if not lengths or any(n < 1 for n in lengths):
        raise ConfigError(f"contexts={value!r}: give prompt lengths >= 1, comma-separated (e.g. 256,1024,2048)")
    if len(set(lengths)) != len(lengths):
        raise ConfigError(f"contexts={value!r} names a length twice")
    return lengths


def _choices(key: str, value: str, allowed: tuple[str, ...], allow_none: bool = False) -> list[str]:
    if allow_none and value.strip() in ("", "none"):
        return []
    items = [v.strip() for v in str(value).split(",") if v.strip()]
    bad = [v for v in items if v not in allowed]
    if bad or not items:
        raise ConfigError(f"{key}={value!r}: choose from {', '.join(allowed)}" + (" (or none)" if allow_none else ""))
    return items


# -- self-speculative decoding of a trained checkpoint (zoo.bench.speculative) ---------------------
@dataclass(kw_only=True)
class SpeculativeOptions:
    """zoo-bench ckpt=PATH: greedy decoding of a checkpoint trained with task.mtp_depth, plain and
    self-speculative (its multi-token prediction modules draft), interleaved rounds, medians."""

    ckpt: str | None = field(
        default=None,
        metadata={"help": "a checkpoint trained with task.mtp_depth: time its greedy decoding plain and speculative"},
    )
    prompts: str | None = field(
        default=None, metadata={"help": "ckpt: a text file, one prompt a line (default: eight verses of the KJV)"}
    )
    new_tokens: int = field(default=32, metadata={"help": "ckpt: new tokens per prompt (no stop at eos)"})
    rounds: int = field(default=5, metadata={"help": "interleaved timed rounds; medians are reported"})
    threads: int = field(default=2, metadata={"help": "torch intra-op threads (0: torch's default)"})

    def __post_init__(self) -> None:
        for name in ("new_tokens", "rounds"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.threads <= MAX_THREADS:
            raise ConfigError(f"threads must be from 0 to {MAX_THREADS}, got {self.threads}")
