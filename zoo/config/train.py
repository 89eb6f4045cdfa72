"""Typed schemas of a training run: task, optimizer, schedule and checkpoints (the loggers'
are in `zoo.config.logger`).
(Trainer arguments are Lightning's own and pass through as a mapping.) No torch import."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import List, Optional

from zoo.config.errors import ConfigError
from zoo.config.model import Choice
from zoo.config.tasks import TaskKind  # defined beside the table of task shapes; imported from here too


class Pooling(Choice):
    """How a classifier reads one vector from the encoder states."""

    cls = "cls"  # the first position ([CLS], Devlin et al. 2019)
    mean = "mean"  # the mean over real tokens
    last = "last"  # the last real token (for causal models)


class OptimizerKind(Choice):
    adamw = "adamw"  # Loshchilov & Hutter 2019
    adam = "adam"  # Kingma & Ba 2015 (weight decay coupled to the gradient; Vaswani et al.)


class OptimizerImpl(Choice):
    """How torch's Adam/AdamW runs its update (same arithmetic, different kernels)."""

    auto = "auto"  # fused on CUDA, torch's default elsewhere (foreach where supported)
    for_loop = "for_loop"  # one parameter at a time
    foreach = "foreach"  # multi-tensor ops over all parameters of a group
    fused = "fused"  # one fused kernel per group (CPU and CUDA)


class OutputLoss(Choice):
    """How token-level tasks compute the loss of the output head in training."""

    auto = "auto"  # chunked on the CPU, logits on an accelerator (fewer kernel launches there)
    logits = "logits"  # materialise the (N, V) logits, then softmax cross-entropy
    chunked = "chunked"  # projection + cross-entropy in chunks of rows, logits never whole
    liger = "liger"  # Liger-Kernel's fused linear cross-entropy (Triton, CUDA only; pip install '.[liger]')


class ScheduleKind(Choice):
    constant = "constant"  # optional linear warmup, then flat
    cosine = "cosine"  # linear warmup, cosine decay to min_lr_ratio · lr (Loshchilov & Hutter 2017)
    inverse_sqrt = "inverse_sqrt"  # d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), Vaswani et al.


# Signals a SLURM job may ask for before its time limit (sbatch --signal) that Python can catch
# and that nothing else in a run uses.
REQUEUE_SIGNALS = ("SIGUSR1", "SIGUSR2")


class NonFinitePolicy(Choice):
    """What a training step does when its loss is NaN or infinite."""

    stop = "stop"  # end the run with an error naming the step; checkpoints already written stay
    skip = "skip"  # leave the weights as they are for this step and go on (counted in metrics)


class ProgressBar(Choice):
    rich = "rich"
    tqdm = "tqdm"
    none = "none"


@dataclass(kw_only=True)
class TaskConfig:
    kind: TaskKind = field(default=TaskKind.causal_lm, metadata={"help": "training objective"})
    label_smoothing: float = field(
        default=0.0, metadata={"help": "cross-entropy label smoothing (Szegedy et al. 2016)"}
    )
    pooling: Optional[Pooling] = field(
        default=None,
        metadata={"help": "classification: cls, mean or last; default cls for encoders, last "
                  "for decoders"},
    )
    generate_max_tokens: int = field(
        default=32, metadata={"help": "seq2seq: longest greedy output when validation scores BLEU"}
    )
    on_nonfinite_loss: NonFinitePolicy = field(
        default=NonFinitePolicy.stop,
        metadata={"help": "stop: end the run naming the step; skip: no update for that step, "
                  "counted as train/nonfinite_skipped"},
    )
    output_loss: OutputLoss = field(
        default=OutputLoss.auto,
        metadata={"help": "token tasks in training: chunked (projection + cross-entropy per "
                  "chunk of rows, less memory, faster on the CPU), logits (the whole (N, V) "
                  "tensor, fewer kernel launches), liger (Liger-Kernel's fused Triton kernel, "
                  "CUDA only, optional extra) or auto (chunked on the CPU, logits elsewhere)"},
    )
    loss_chunk: int = field(
        default=1024, metadata={"help": "output_loss=chunked: rows of logits alive at a time"}
    )
    tf32: bool = field(
        default=True,
        metadata={"help": "on CUDA, float32 matmuls on TF32 tensor cores "
                  "(torch.set_float32_matmul_precision('high')); nothing elsewhere"},
    )
    compile: bool = field(
        default=False,
        metadata={"help": "torch.compile the model, and for token tasks the whole training loss "
                  "(stack, output head and loss in one graph; under trainer=fsdp each layer, "
                  "compiled before it is sharded); first steps slower while it compiles; on CPU "
                  "needs a C++ compiler"},
    )

    def __post_init__(self) -> None:
        self.kind = TaskKind.parse(self.kind, "task.kind")
        self.output_loss = OutputLoss.parse(self.output_loss, "task.output_loss")
        if not isinstance(self.loss_chunk, int) or isinstance(self.loss_chunk, bool) or self.loss_chunk < 1:
            raise ConfigError(f"task.loss_chunk must be a positive integer, got {self.loss_chunk!r}")
        self.on_nonfinite_loss = NonFinitePolicy.parse(self.on_nonfinite_loss, "task.on_nonfinite_loss")
        if self.pooling is not None:
            self.pooling = Pooling.parse(self.pooling, "task.pooling")
            if self.kind != TaskKind.classification:
                raise ConfigError(f"task.pooling only applies to task=classification, not {self.kind.value}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(f"task.label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.generate_max_tokens < 1:
            raise ConfigError(f"task.generate_max_tokens must be >= 1, got {self.generate_max_tokens}")


@dataclass(kw_only=True)
class OptimConfig:
    kind: OptimizerKind = OptimizerKind.adamw
    lr: float = field(
        default=3e-4,
        metadata={"help": "peak learning rate; with scheduler=inverse_sqrt a multiplier of the "
                  "schedule (1.0 = the paper's rate)"},
    )
    betas: List[float] = field(default_factory=lambda: [0.9, 0.95])
    eps: float = 1e-8
    weight_decay: float = field(
        default=0.1, metadata={"help": "decoupled decay; never applied to norms, biases, embeddings"}
    )
    implementation: OptimizerImpl = field(
        default=OptimizerImpl.auto,
        metadata={"help": "auto (fused on CUDA, torch's default elsewhere), for_loop, foreach or "
                  "fused: torch's kernels for the update (same arithmetic)"},
    )

    def __post_init__(self) -> None:
        self.kind = OptimizerKind.parse(self.kind, "optim.kind")
        self.implementation = OptimizerImpl.parse(self.implementation, "optim.implementation")
        self.betas = list(self.betas)
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ConfigError(f"optim.betas must be two numbers in [0, 1), got {self.betas}")
        if self.lr <= 0:
            raise ConfigError(f"optim.lr must be > 0, got {self.lr}")
        if self.eps <= 0 or self.weight_decay < 0:
            raise ConfigError(
                f"optim.eps must be > 0 and optim.weight_decay >= 0, got {self.eps}, {self.weight_decay}"
            )


@dataclass(kw_only=True)
class SchedulerConfig:
    kind: ScheduleKind = ScheduleKind.cosine
    warmup_steps: int = 100
    min_lr_ratio: float = field(default=0.1, metadata={"help": "cosine: final lr / peak lr"})
    total_steps: Optional[int] = field(
        default=None, metadata={"help": "cosine: steps to decay over; default trainer.max_steps"}
    )

    def __post_init__(self) -> None:
        self.kind = ScheduleKind.parse(self.kind, "scheduler.kind")
        for f in fields(self):
            if f.name in ("min_lr_ratio", "total_steps") and self.kind != ScheduleKind.cosine \
                    and getattr(self, f.name) != f.default:
                raise ConfigError(
                    f"scheduler.{f.name} only applies to scheduler=cosine, not {self.kind.value}"
                )
        if self.warmup_steps < 0:
            raise ConfigError(f"scheduler.warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.kind == ScheduleKind.inverse_sqrt and self.warmup_steps < 1:
            raise ConfigError("scheduler=inverse_sqrt needs scheduler.warmup_steps >= 1")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ConfigError(f"scheduler.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if self.total_steps is not None and self.total_steps < 1:
            raise ConfigError(f"scheduler.total_steps must be >= 1, got {self.total_steps}")


@dataclass(kw_only=True)
class CallbacksConfig:
    checkpoint_every_n_steps: int = field(
        default=200, metadata={"help": "write checkpoints/last.ckpt every N optimizer steps"}
    )
    save_top_k: int = field(default=1, metadata={"help": "best checkpoints kept by val/loss"})
    progress_bar: ProgressBar = ProgressBar.rich
    requeue_signal: Optional[str] = field(
        default="SIGUSR2",
        metadata={"help": "in a SLURM job, the signal (sbatch --signal) on which the run saves "
                  "last.ckpt and requeues itself; null turns this off"},
    )

    stop_grace_s: float = field(
        default=20.0,
        metadata={"help": "after SIGTERM or Ctrl-C, seconds the next step boundary (where last.ckpt is "
                  "saved) may take; past that, or at a second signal, the run stops at once without saving"},
    )

    def __post_init__(self) -> None:
        self.progress_bar = ProgressBar.parse(self.progress_bar, "callbacks.progress_bar")
        if not (self.stop_grace_s > 0):
            raise ConfigError(f"callbacks.stop_grace_s must be > 0 seconds, got {self.stop_grace_s}")
        if self.requeue_signal is not None and self.requeue_signal not in REQUEUE_SIGNALS:
            raise ConfigError(
                f"callbacks.requeue_signal must be one of {', '.join(REQUEUE_SIGNALS)} or null, "
                f"got {self.requeue_signal!r}"
            )
        if self.checkpoint_every_n_steps < 1:
            raise ConfigError(
                f"callbacks.checkpoint_every_n_steps must be >= 1, got {self.checkpoint_every_n_steps}"
            )
