"""Typed schemas of a training run: optimizer, schedule and callbacks (the task's is in
`zoo.config.schema.task`, the loggers' in `zoo.config.schema.logger`).
(Trainer arguments are Lightning's own and pass through as a mapping.) No torch import."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields

from zoo.config.choice import Choice, listed
from zoo.config.errors import ConfigError
from zoo.config.facts.ema import EMA_KEYS, EmaEval, check_ema
from zoo.config.facts.muon import NORMUON_BETA2, MuonVariant, NsMethod, NsPrecision, check_muon
from zoo.config.facts.optimizers import OPTIMIZER_FACTS, OptimizerKind, optimizer_readers
from zoo.config.facts.schedules import SCHEDULE_FACTS, DecayShape, ScheduleKind, schedule_readers
from zoo.config.schema.frozen import Items, freeze_items, settle, thawed
from zoo.config.schema.harness import check_limit


class OptimizerImpl(Choice):
    """How torch's Adam/AdamW runs its update (same arithmetic, different kernels)."""

    auto = "auto"  # fused on CUDA, torch's default elsewhere (foreach where supported)
    for_loop = "for_loop"  # one parameter at a time
    foreach = "foreach"  # multi-tensor ops over all parameters of a group
    fused = "fused"  # one fused kernel per group (CPU and CUDA)


# Signals a SLURM job may ask for before its time limit (sbatch --signal) that Python can catch
# and that nothing else in a run uses.
REQUEUE_SIGNALS = ("SIGUSR1", "SIGUSR2")
BEAT_S = 5.0  # how often a rank of a job on several processes beats its heartbeat (zoo.training.distributed)
RANK_SILENCE_S = 30.0  # callbacks.rank_silence_s's default


class ProgressBar(Choice):
    rich = "rich"
    tqdm = "tqdm"
    none = "none"


class AdjustLr(Choice):
    """torch.optim.Muon's `adjust_lr_fn`: how a matrix's learning rate follows its shape (A x B)."""

    match_rms_adamw = "match_rms_adamw"  # 0.2 sqrt(max(A, B)) x lr: AdamW's update RMS (Liu et al. 2025)
    original = "original"  # sqrt(max(1, A / B)) x lr (Jordan et al. 2024)


@dataclass(kw_only=True, frozen=True)
class OptimConfig:
    kind: OptimizerKind = field(
        default=OptimizerKind.adamw,
        metadata={
            "help": f"{OptimizerKind.listed()} (what each does: zoo.config.facts.optimizers.OPTIMIZER_FACTS; "
            "muon: Muon for the hidden layers' 2-D matrices, AdamW for embeddings, output head, "
            "norms and biases)"
        },
    )
    lr: float = field(
        default=3e-4,
        metadata={
            "help": "peak learning rate; with scheduler=inverse_sqrt a multiplier of the "
            "schedule (1.0 = the paper's rate); optim=muon: AdamW's rate (and Muon's unless "
            "optim.muon_lr is set)"
        },
    )
    betas: Items[float] = field(default_factory=lambda: Items[float]((0.9, 0.95)))
    eps: float = 1e-8
    weight_decay: float = field(
        default=0.1, metadata={"help": "decoupled decay; never applied to norms, biases, embeddings"}
    )
    implementation: OptimizerImpl = field(
        default=OptimizerImpl.auto,
        metadata={
            "help": "auto (fused on CUDA, torch's default elsewhere), for_loop, foreach or "
            "fused: torch's kernels for the update (same arithmetic)"
        },
    )
    muon_lr: float | None = field(
        default=None,
        metadata={
            "help": "optim=muon: Muon's base rate for the hidden matrices, before adjust_lr_fn "
            "scales it by shape; null = optim.lr (with match_rms_adamw, AdamW's rate carries over)"
        },
    )
    momentum: float = field(default=0.95, metadata={"help": "optim=muon: momentum of Muon's buffer"})
    nesterov: bool = field(default=True, metadata={"help": "optim=muon: Nesterov momentum"})
    ns_steps: int = field(default=5, metadata={"help": "optim=muon: Newton-Schulz iterations"})
    adjust_lr_fn: AdjustLr = field(
        default=AdjustLr.match_rms_adamw,
        metadata={
            "help": "optim=muon: match_rms_adamw (rate x 0.2 sqrt(max(A, B)), Liu et al. 2025: "
            "AdamW's lr and weight decay carry over) or original (rate x sqrt(max(1, A/B)), "
            "Jordan et al. 2024: lr about 0.02)"
        },
    )
    # the exponential moving average of the weights (zoo.config.facts.ema states the rule)
    ema: float | None = field(
        default=None,
        metadata={
            "help": "decay of an exponential moving average of the weights, in (0, 1), e.g. 0.999 "
            "(float32, updated after each optimizer step, saved in each checkpoint beside the raw "
            "weights; zoo-eval/zoo-generate/zoo-export weights=ema read it); null: off"
        },
    )
    ema_every: int = field(default=1, metadata={"help": "optim.ema: update the average every N optimizer steps"})
    ema_warmup: bool = field(
        default=False,
        metadata={"help": "optim.ema: decay min(optim.ema, (1 + t) / (10 + t)) at the t-th update (timm, TensorFlow)"},
    )
    ema_eval: EmaEval = field(
        default=EmaEval.raw,
        metadata={
            "help": "optim.ema: the weights validation measures: raw (val/loss), ema (val/loss is the "
            "average's) or both (val/loss, then val_ema/loss of the average)"
        },
    )

    # Muon's variants, iteration and its precision (zoo.config.facts.muon states each)
    muon_variant: MuonVariant = field(
        default=MuonVariant.muon,
        metadata={
            "help": f"optim=muon: {MuonVariant.listed()} (normuon, Li et al. 2025: each row of the "
            "orthogonalised update divided by the root of an EMA of its mean square, the whole rescaled "
            "to its norm)"
        },
    )
    ns_method: NsMethod = field(
        default=NsMethod.quintic,
        metadata={
            "help": f"optim=muon: the orthogonalising iteration, {NsMethod.listed()} (quintic: Jordan et "
            "al. 2024's fixed coefficients; polar_express: Amsel et al. 2025's optimal one per iteration)"
        },
    )
    ns_precision: NsPrecision = field(
        default=NsPrecision.bfloat16,
        metadata={"help": "optim=muon: bfloat16 (torch.optim.Muon's) or float32: the iteration's precision"},
    )
    normuon_beta2: float = field(
        default=NORMUON_BETA2,
        metadata={"help": "optim.muon_variant=normuon: decay of each row's second moment"},
    )

    def __post_init__(self) -> None:
        settle(self, "kind", OptimizerKind.parse(self.kind, "optim.kind"))
        settle(self, "implementation", OptimizerImpl.parse(self.implementation, "optim.implementation"))
        settle(self, "adjust_lr_fn", AdjustLr.parse(self.adjust_lr_fn, "optim.adjust_lr_fn"))
        settle(self, "betas", freeze_items(self.betas))
        # the weights' average is no optimizer's key: every kind takes it (zoo.config.facts.ema)
        _refuse_unread(self, "optim", (*OPTIMIZER_FACTS[self.kind].params, *EMA_KEYS), optimizer_readers)
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ConfigError(f"optim.betas must be two numbers in [0, 1), got {list(self.betas)}")
        if self.lr <= 0:
            raise ConfigError(f"optim.lr must be > 0, got {self.lr}")
        if self.eps <= 0 or self.weight_decay < 0:
            raise ConfigError(f"optim.eps must be > 0 and optim.weight_decay >= 0, got {self.eps}, {self.weight_decay}")
        if self.muon_lr is not None and not self.muon_lr > 0:
            raise ConfigError(f"optim.muon_lr must be > 0 (or null: optim.lr), got {self.muon_lr}")
        if not 0.0 <= self.momentum < 1.0:
            raise ConfigError(f"optim.momentum must be in [0, 1), got {self.momentum}")
        if isinstance(self.ns_steps, bool) or not isinstance(self.ns_steps, int) or not 1 <= self.ns_steps < 100:
            raise ConfigError(f"optim.ns_steps must be a whole number in [1, 99], got {self.ns_steps!r}")
        settle(self, "ema_eval", EmaEval.parse(self.ema_eval, "optim.ema_eval"))
        check_ema(self)
        settle(self, "muon_variant", MuonVariant.parse(self.muon_variant, "optim.muon_variant"))
        settle(self, "ns_method", NsMethod.parse(self.ns_method, "optim.ns_method"))
        settle(self, "ns_precision", NsPrecision.parse(self.ns_precision, "optim.ns_precision"))
        check_muon(self)


def _refuse_unread(cfg, section: str, reads: tuple[str, ...], readers) -> None:
    """A key the chosen kind's row does not read, set away from its default, is refused on one
    line naming the kinds that read it (the rows of `zoo.config.facts`)."""
    for f in fields(cfg):
        if f.name == "kind" or f.name in reads:
            continue
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        if thawed(getattr(cfg, f.name)) != thawed(default):
            owners = " or ".join(k.value for k in readers(f.name)) or "no kind"
            raise ConfigError(f"{section}.{f.name} only applies to {section}={owners}, not {cfg.kind.value}")


@dataclass(kw_only=True, frozen=True)
class SchedulerConfig:
    kind: ScheduleKind = field(
        default=ScheduleKind.cosine,
        metadata={
            "help": f"{ScheduleKind.listed()} (wsd: warmup-stable-decay; linear: straight to zero; rows: "
            "zoo.config.facts.schedules.SCHEDULE_FACTS)"
        },
    )
    warmup_steps: int = 100
    min_lr_ratio: float = field(
        default=0.1, metadata={"help": f"{listed(schedule_readers('min_lr_ratio'))}: final lr / peak lr"}
    )
    total_steps: int | None = field(
        default=None,
        metadata={
            "help": f"{listed(schedule_readers('total_steps'))}: steps the schedule ends at; default trainer.max_steps"
        },
    )
    decay_fraction: float = field(
        default=0.2, metadata={"help": "wsd: the cooldown's share of total_steps (unless decay_steps is set)"}
    )
    decay_steps: int | None = field(
        default=None,
        metadata={
            "help": "wsd: the cooldown's length in steps, ending at total_steps "
            "(0 = never decays: a stable run to branch cooldowns from)"
        },
    )
    decay_shape: DecayShape = field(
        default=DecayShape.linear,
        metadata={"help": "wsd: the cooldown, linear (1 - p) or one_minus_sqrt (1 - sqrt(p)), p its progress"},
    )

    def __post_init__(self) -> None:
        settle(self, "kind", ScheduleKind.parse(self.kind, "scheduler.kind"))
        settle(self, "decay_shape", DecayShape.parse(self.decay_shape, "scheduler.decay_shape"))
        _refuse_unread(self, "scheduler", SCHEDULE_FACTS[self.kind].params, schedule_readers)
        if self.warmup_steps < 0:
            raise ConfigError(f"scheduler.warmup_steps must be >= 0, got {self.warmup_steps}")
        if SCHEDULE_FACTS[self.kind].needs_warmup and self.warmup_steps < 1:
            raise ConfigError(f"scheduler={self.kind.value} needs scheduler.warmup_steps >= 1")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ConfigError(f"scheduler.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if self.total_steps is not None and self.total_steps < 1:
            raise ConfigError(f"scheduler.total_steps must be >= 1, got {self.total_steps}")
        if not 0.0 <= self.decay_fraction <= 1.0:
            raise ConfigError(f"scheduler.decay_fraction must be in [0, 1], got {self.decay_fraction}")
        if self.decay_steps is not None:
            if self.decay_steps < 0:
                raise ConfigError(f"scheduler.decay_steps must be >= 0, got {self.decay_steps}")
            if self.decay_fraction != 0.2:
                raise ConfigError(
                    "scheduler.decay_steps and scheduler.decay_fraction both set the cooldown's length: set one"
                )


@dataclass(kw_only=True, frozen=True)
class CallbacksConfig:
    checkpoint_every_n_steps: int = field(
        default=200, metadata={"help": "write checkpoints/last.ckpt every N optimizer steps"}
    )
    save_top_k: int = field(default=1, metadata={"help": "best checkpoints kept by val/loss"})
    progress_bar: ProgressBar = ProgressBar.rich
    requeue_signal: str | None = field(
        default="SIGUSR2",
        metadata={
            "help": "in a SLURM job, the signal (sbatch --signal) on which the run saves "
            "last.ckpt and requeues itself; null turns this off"
        },
    )

    stop_grace_s: float = field(
        default=20.0,
        metadata={
            "help": "after SIGTERM or Ctrl-C, seconds the next step boundary (where last.ckpt is "
            "saved) may take; past that, or at a second signal, the run stops at once without saving"
        },
    )

    rank_silence_s: float = field(
        default=RANK_SILENCE_S,
        metadata={
            "help": "in a job on several hosts, seconds a host's first rank may go without a heartbeat "
            f"(one every {BEAT_S:g} s, a file in the run directory) before it counts as dead or hung and the "
            f"job ends naming it; at least {2 * BEAT_S:g}"
        },
    )

    instability_every: int | None = field(
        default=None,
        metadata={
            "help": "every N optimizer steps (and at the last), log train/max_attn_logit (per layer "
            "too), train/output_logit_mean and train/log_z_mean (Wortsman et al. 2023's "
            "instability signals); null or 0: off"
        },
    )

    downstream: Items[str] = field(
        default_factory=Items[str],
        metadata={
            "help": "lm-evaluation-harness tasks scored during training, e.g. "
            "[kjv_cloze,kjv_next_verse] (needs zoo[eval]); logged as harness/TASK/METRIC to every "
            "tracker, the last in summary.json; [] (default): off"
        },
    )
    downstream_every: int | None = field(
        default=None,
        metadata={"help": "callbacks.downstream: every N optimizer steps (and at the end); null: at each validation"},
    )
    downstream_limit: float | None = field(
        default=100,
        metadata={"help": "callbacks.downstream: examples of each task (below 1: a fraction of it; null: all)"},
    )
    routing_every: int | None = field(
        default=50,
        metadata={
            "help": "model.ffn=moe: every N optimizer steps (and at the last), log each mixture "
            "layer's expert load, dropped share and router entropy, and their means over layers "
            "(train/moe_load, train/moe_load_max, train/moe_load_min, train/moe_dropped, train/moe_entropy); the last "
            "values go to summary.json; null or 0: off; a dense model logs none"
        },
    )

    def __post_init__(self) -> None:
        settle(self, "progress_bar", ProgressBar.parse(self.progress_bar, "callbacks.progress_bar"))
        settle(self, "downstream", tuple(str(t).strip() for t in self.downstream))
        if any(not t for t in self.downstream) or len(set(self.downstream)) != len(self.downstream):
            raise ConfigError(f"callbacks.downstream must name each task once, got {list(self.downstream)}")
        if self.downstream_every is not None and self.downstream_every < 1:
            raise ConfigError(
                f"callbacks.downstream_every must be >= 1 (null: at each validation), got {self.downstream_every}"
            )
        check_limit("callbacks.downstream_limit", self.downstream_limit)  # null: every example
        if self.instability_every is not None and self.instability_every < 0:
            raise ConfigError(
                f"callbacks.instability_every must be >= 0 (0 or null: off), got {self.instability_every}"
            )
        if self.routing_every is not None and (isinstance(self.routing_every, bool) or self.routing_every < 0):
            raise ConfigError(f"callbacks.routing_every must be >= 0 (0 or null: off), got {self.routing_every}")
        if not (self.stop_grace_s > 0):
            raise ConfigError(f"callbacks.stop_grace_s must be > 0 seconds, got {self.stop_grace_s}")
        if not (self.rank_silence_s >= 2 * BEAT_S):  # two beats missed at the least
            raise ConfigError(
                f"callbacks.rank_silence_s must be >= {2 * BEAT_S:g} seconds (a heartbeat every {BEAT_S:g} s), "
                f"got {self.rank_silence_s}"
            )
        if self.requeue_signal is not None and self.requeue_signal not in REQUEUE_SIGNALS:
            raise ConfigError(
                f"callbacks.requeue_signal must be one of {', '.join(REQUEUE_SIGNALS)} or null, "
                f"got {self.requeue_signal!r}"
            )
        if self.checkpoint_every_n_steps < 1:
            raise ConfigError(f"callbacks.checkpoint_every_n_steps must be >= 1, got {self.checkpoint_every_n_steps}")


def _defaults(schema) -> dict:
    """A schema's keys that have a fixed default, as plain data."""
    out = {}
    for f in fields(schema):
        if f.default is not MISSING:
            out[f.name] = f.default.value if isinstance(f.default, Choice) else f.default
    return out


def optim_defaults() -> dict:
    """OptimConfig's defaults: a key added since a checkpoint was written ran at its default."""
    return _defaults(OptimConfig)


def scheduler_defaults() -> dict:
    """SchedulerConfig's defaults: a key added since a checkpoint was written ran at its default."""
    return _defaults(SchedulerConfig)
