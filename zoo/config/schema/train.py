"""Typed schemas of a training run: optimizer, schedule and callbacks (the task's is in
`zoo.config.schema.task`, the loggers' in `zoo.config.schema.logger`).
(Trainer arguments are Lightning's own and pass through as a mapping.) No torch import."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import List, Optional

from zoo.config.errors import ConfigError
from zoo.config.choice import Choice


class OptimizerKind(Choice):
    adamw = "adamw"  # Loshchilov & Hutter 2019
    adam = "adam"  # Kingma & Ba 2015 (weight decay coupled to the gradient; Vaswani et al.)


class OptimizerImpl(Choice):
    """How torch's Adam/AdamW runs its update (same arithmetic, different kernels)."""

    auto = "auto"  # fused on CUDA, torch's default elsewhere (foreach where supported)
    for_loop = "for_loop"  # one parameter at a time
    foreach = "foreach"  # multi-tensor ops over all parameters of a group
    fused = "fused"  # one fused kernel per group (CPU and CUDA)


class ScheduleKind(Choice):
    constant = "constant"  # optional linear warmup, then flat
    cosine = "cosine"  # linear warmup, cosine decay to min_lr_ratio · lr (Loshchilov & Hutter 2017)
    inverse_sqrt = "inverse_sqrt"  # d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), Vaswani et al.


# Signals a SLURM job may ask for before its time limit (sbatch --signal) that Python can catch
# and that nothing else in a run uses.
REQUEUE_SIGNALS = ("SIGUSR1", "SIGUSR2")


class ProgressBar(Choice):
    rich = "rich"
    tqdm = "tqdm"
    none = "none"


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

    instability_every: Optional[int] = field(
        default=None,
        metadata={"help": "every N optimizer steps (and at the last), log train/max_attn_logit (per layer "
                  "too), train/output_logit_mean and train/log_z_mean (Wortsman et al. 2023's "
                  "instability signals); null or 0: off"},
    )

    def __post_init__(self) -> None:
        self.progress_bar = ProgressBar.parse(self.progress_bar, "callbacks.progress_bar")
        if self.instability_every is not None and self.instability_every < 0:
            raise ConfigError(
                f"callbacks.instability_every must be >= 0 (0 or null: off), got {self.instability_every}"
            )
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
