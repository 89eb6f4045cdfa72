"""zoo-plan's inputs (`PlanOptions`): the micro-batch, precision, strategy and device a model is
planned for, and byte sizes as people write them (`80GiB`). Torch-free, so `zoo-plan --help`
and a bad option answer before torch loads."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.facts.muon import MuonVariant
from zoo.config.facts.optimizers import OptimizerKind, RunShape, optimizer_refusal


class Precision(Choice):
    """Lightning's trainer.precision values a plan covers."""

    full = "32-true"  # float32 weights, gradients, moments and activations
    bf16_mixed = "bf16-mixed"  # float32 weights and moments, bf16 autocast in forward
    bf16_true = "bf16-true"  # everything bf16 (AdamW's moments follow the parameters' dtype)


class Strategy(Choice):
    none = "none"  # one device, no wrapper (trainer=cpu, trainer=gpu)
    ddp = "ddp"  # a whole copy per device, plus DDP's gradient buckets
    fsdp = "fsdp"  # FSDP2: weights, gradients and moments sharded over world_size devices
    hsdp = "hsdp"  # FSDP2 over world_size / replicate devices, replicated replicate times


class Device(Choice):
    """Whose kernels and defaults the plan follows (the output loss, the optimizer kernel)."""

    cpu = "cpu"
    cuda = "cuda"


class Optimizer(Choice):
    """optim.implementation: `auto` is zoo's rule (fused on CUDA, foreach where Lightning clips
    gradients in mixed precision, torch's default on the CPU)."""

    auto = "auto"
    fused = "fused"
    foreach = "foreach"
    for_loop = "for_loop"


class LossPath(Choice):
    """task.output_loss: `auto` is chunked on the CPU and logits on CUDA, as zoo-train runs."""

    auto = "auto"
    chunked = "chunked"
    logits = "logits"


UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_bytes(value, key: str) -> int:
    """`80GiB`, `80GB`, `512MiB`, `1.5TiB` or a number of bytes -> bytes."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", str(value))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in UNITS:
        raise ConfigError(f"{key}={value!r}: write a size such as 80GiB, 40GB, 512MiB or a number of bytes")
    return int(float(match.group(1)) * UNITS[unit])


def show_bytes(n: float) -> str:
    """Bytes in the largest binary unit that keeps the number >= 1: `1.50 GiB`."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{int(n)} B"


CUDA_RESERVE = 2**30  # the CUDA context, cuBLAS workspaces and allocator rounding: outside any tensor


@dataclass(kw_only=True)
class PlanOptions:
    batch: int = field(
        default=8,
        metadata={
            "help": "micro-batch per device (rows a forward takes: data.max_device_batch_size or the per-device batch)"
        },
    )
    seq_len: int | None = field(
        default=None,
        metadata={"help": "tokens per row (encoder-decoder: source and target each); default model.max_seq_len"},
    )
    precision: str = field(
        default=Precision.bf16_mixed.value, metadata={"help": "trainer.precision: 32-true, bf16-mixed or bf16-true"}
    )
    strategy: Strategy = field(default=Strategy.none, metadata={"help": "none (one device), ddp, fsdp or hsdp"})
    world_size: int = field(default=1, metadata={"help": "devices in all (trainer.devices x trainer.num_nodes)"})
    replicate: int = field(
        default=1, metadata={"help": "hsdp: replicas; each shards over world_size / replicate devices"}
    )
    memory: str = field(
        default="80GiB",
        metadata={"help": "memory of one device (80GiB, 40GB, ...): the largest micro-batch that fits it is reported"},
    )
    reserve: str | None = field(
        default=None,
        metadata={
            "help": "memory kept free for what is no tensor; default 1GiB on cuda (CUDA context, workspaces), 0 on cpu"
        },
    )
    device: Device = field(
        default=Device.cuda,
        metadata={"help": "cpu or cuda: whose kernels and defaults (output loss, optimizer kernel) the plan follows"},
    )
    output_loss: LossPath = field(
        default=LossPath.auto,
        metadata={"help": "task.output_loss: auto (chunked on cpu, logits on cuda), chunked or logits"},
    )
    loss_chunk: int = field(
        default=1024, metadata={"help": "task.loss_chunk: rows of logits alive at a time (chunked)"}
    )
    optimizer: Optimizer = field(
        default=Optimizer.auto, metadata={"help": "optim.implementation: auto, fused, foreach or for_loop"}
    )
    optim: OptimizerKind = field(
        default=OptimizerKind.adamw,
        metadata={
            "help": f"optim.kind: {OptimizerKind.listed()} (the state each keeps is its row's: "
            "zoo.config.facts.optimizers.OPTIMIZER_FACTS)"
        },
    )
    muon_variant: MuonVariant = field(
        default=MuonVariant.muon,
        metadata={
            "help": f"optim.muon_variant under optim=muon: {MuonVariant.listed()} (normuon adds a float32 "
            "second moment per row of each hidden matrix)"
        },
    )
    clip: bool = field(
        default=True,
        metadata={
            "help": "trainer.gradient_clip_val > 0 (zoo's default): with "
            "bf16-mixed, auto picks foreach (Lightning refuses fused there)"
        },
    )

    def run_shape(self, parametrization: str | None = None) -> RunShape:
        """What the optimizer's refusals look at: the strategy, and the model's parametrization
        once the planner knows the model."""
        return RunShape(
            strategy=self.strategy.value,
            sharded=self.strategy in (Strategy.fsdp, Strategy.hsdp),
            parametrization=parametrization,
            strategy_key="strategy",
        )

    def __post_init__(self) -> None:
        self.precision = Precision.parse(self.precision, "precision")
        self.strategy = Strategy.parse(self.strategy, "strategy")
        self.device = Device.parse(self.device, "device")
        self.output_loss = LossPath.parse(self.output_loss, "output_loss")
        self.optimizer = Optimizer.parse(self.optimizer, "optimizer")
        self.optim = OptimizerKind.parse(self.optim, "optim")
        self.muon_variant = MuonVariant.parse(self.muon_variant, "muon_variant")
        if self.muon_variant != MuonVariant.muon and self.optim != OptimizerKind.muon:
            raise ConfigError(f"muon_variant={self.muon_variant.value} applies to optim=muon only; add optim=muon")
        refusal = optimizer_refusal(self.optim, self.run_shape())
        if refusal is not None:  # the optimizer's row: what zoo-train refuses too
            raise ConfigError(refusal)
        for name in ("batch", "world_size", "replicate", "loss_chunk"):
            _positive(name, getattr(self, name))
        if self.seq_len is not None:
            _positive("seq_len", self.seq_len)
        self.memory_bytes = parse_bytes(self.memory, "memory")
        if self.reserve is None:
            self.reserve_bytes = CUDA_RESERVE if self.device == Device.cuda else 0
        else:
            self.reserve_bytes = parse_bytes(self.reserve, "reserve")
        if self.reserve_bytes >= self.memory_bytes:
            raise ConfigError(
                f"reserve ({show_bytes(self.reserve_bytes)}) leaves nothing of memory ({show_bytes(self.memory_bytes)})"
            )
        if self.strategy == Strategy.hsdp:
            if self.world_size % self.replicate:
                raise ConfigError(
                    f"strategy=hsdp: world_size ({self.world_size}) must be divisible by replicate ({self.replicate})"
                )
        elif self.replicate != 1:
            raise ConfigError(f"replicate={self.replicate} only applies to strategy=hsdp, not {self.strategy.value}")
        if self.strategy == Strategy.none and self.world_size != 1:
            raise ConfigError(
                f"world_size={self.world_size} needs a strategy (ddp, fsdp or hsdp); strategy=none is one device"
            )

    @property
    def shard_group(self) -> int:
        """Devices one copy of the weights is sharded over: world_size (fsdp), world_size /
        replicate (hsdp), 1 otherwise."""
        if self.strategy == Strategy.fsdp:
            return self.world_size
        if self.strategy == Strategy.hsdp:
            return self.world_size // self.replicate
        return 1

    @property
    def usable_bytes(self) -> int:
        return self.memory_bytes - self.reserve_bytes


def _positive(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
