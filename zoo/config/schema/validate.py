"""`validate(cfg) -> ZooConfig`: every check a composed config must pass before any data is
read or weights are built, in one place.

A section's own rules live in its schema's `__post_init__` (`ModelConfig`, `TaskConfig`, ...);
the rules that join sections (the task needs its family, learned positions bound the sequence,
the global batch splits over the devices, a schedule fits the run, ...) live here. What the
machine must have (a GPU, an optional package) is not the config's business: the training
command checks it (`zoo.training.machine.check_machine`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zoo.config.errors import ConfigError
from zoo.config.facts.moe_routing import check_balance_weight
from zoo.config.facts.mtp import mtp_refusal
from zoo.config.facts.optimizers import RunShape, optimizer_refusal
from zoo.config.facts.positions import max_positions
from zoo.config.facts.ramps import check_ramp_task, micro_batches
from zoo.config.facts.schedules import SCHEDULE_FACTS, wsd_decay_steps
from zoo.config.facts.tasks import Collate, families_of, task_spec
from zoo.config.schema.batching import per_device_batch
from zoo.config.schema.convert import as_model_config, as_schema, check_seed, reject_non_finite, to_plain
from zoo.config.schema.data import as_data_config, as_tokenizer_config, check_document_mask
from zoo.config.schema.logger import LoggerConfig
from zoo.config.schema.recall import check_recall_run
from zoo.config.schema.root import ZooConfig
from zoo.config.schema.sections import check_sections
from zoo.config.schema.task import OutputLoss, TaskConfig
from zoo.config.schema.train import (
    CallbacksConfig,
    OptimConfig,
    OptimizerImpl,
    ScheduleKind,
    SchedulerConfig,
)
from zoo.config.schema.trainer import SHARDED_PRECISIONS, TrainerConfig, is_sharded_name


def validate(cfg: Any) -> ZooConfig:
    """The composed `cfg` (a DictConfig from `zoo.compose`, or a plain mapping) as a `ZooConfig`
    of validated schema objects; raises `ConfigError` with one line naming the keys (a value
    whose interpolation fails, e.g. `${zoo.steps_for_tokens:0}`, by its key and the reason)."""
    from omegaconf.errors import InterpolationResolutionError

    try:
        return _validate(cfg)
    except InterpolationResolutionError as exc:
        reason = str(exc).strip().splitlines()[0]
        reason = reason.removeprefix(f"{ConfigError.__name__} raised while resolving interpolation: ")  # zoo's own
        key = getattr(exc, "full_key", None)
        raise ConfigError(f"{key}: {reason}" if key else reason) from None


def _validate(cfg: Any) -> ZooConfig:
    if not hasattr(cfg, "get"):
        raise ConfigError(f"a zoo config must be a mapping, got {type(cfg).__name__}")
    check_sections(cfg)
    data = cfg  # sections stay composed nodes, so a value left ??? is named by its key
    trainer = to_plain(data.get("trainer")) or {}
    if not isinstance(trainer, Mapping):
        raise ConfigError(f"trainer must be a mapping, got {type(trainer).__name__}")
    reject_non_finite(dict(trainer), "trainer")
    check_seed(data.get("seed", 0), "seed")
    zc = ZooConfig(
        model=as_model_config(data.get("model")),
        task=as_schema(data.get("task"), TaskConfig, "task"),
        data=as_data_config(data.get("data")),
        tokenizer=as_tokenizer_config(data.get("tokenizer")),
        optim=as_schema(data.get("optim"), OptimConfig, "optim"),
        scheduler=as_schema(data.get("scheduler"), SchedulerConfig, "scheduler"),
        logger=as_schema(data.get("logger"), LoggerConfig, "logger"),
        callbacks=as_schema(data.get("callbacks"), CallbacksConfig, "callbacks"),
        trainer=TrainerConfig(trainer),
        seed=int(data.get("seed", 0)),
        ckpt_path=data.get("ckpt_path"),
        init_from=data.get("init_from"),
        branch_from=data.get("branch_from"),
    )
    _check_task_family(zc)
    check_document_mask(zc.data, zc.task.kind)
    _check_positions(zc)
    _check_sharding(zc)
    _check_optimizer(zc)
    _check_fused_clipping(zc)
    _check_softcapped_loss(zc)
    _check_batch(zc)
    _check_schedule(zc)
    _check_branch(zc)
    check_balance_weight(zc.model, zc.task)  # task.moe_balance read under model.moe_balance=aux_loss only
    _check_mtp(zc)
    _check_ramps(zc)
    check_recall_run(zc.data, zc.tokenizer, zc.task.kind)
    return zc


def _check_task_family(zc: ZooConfig) -> None:
    families = families_of(zc.task.kind)
    if zc.model.family not in families:
        allowed = ", ".join(f.value for f in families)
        raise ConfigError(f"task={zc.task.kind.value} needs model.family in ({allowed}), got {zc.model.family.value}")


def _check_positions(zc: ZooConfig) -> None:
    """A bounded scheme (learned positions) must hold the training windows and, for a task whose
    row decodes in validation (seq2seq), the validation generations (their BOS included)."""
    bound = max_positions(zc.model)
    if bound is None:
        return
    if zc.data.seq_len > bound:
        # init_from's directory fixes model.max_seq_len: only the windows can change
        fix = (
            f"give data.seq_len={bound} or less (init_from={zc.init_from} fixes the architecture)"
            if zc.init_from is not None
            else f"lower data.seq_len or raise model.max_seq_len={zc.data.seq_len}"
        )
        raise ConfigError(
            f"data.seq_len ({zc.data.seq_len}) is longer than learned positions allow "
            f"(model.max_seq_len={bound}): {fix}"
        )
    if task_spec(zc.task.kind).decodes_in_validation and zc.task.generate_max_tokens >= bound:
        raise ConfigError(
            f"task.generate_max_tokens ({zc.task.generate_max_tokens}) plus BOS is longer than "
            f"learned positions allow (model.max_seq_len={bound}): lower task.generate_max_tokens "
            f"or raise model.max_seq_len={zc.task.generate_max_tokens + 1}"
        )


def _check_fused_clipping(zc: ZooConfig) -> None:
    """Lightning's mixed-precision plugins refuse to clip the gradients of a fused optimizer
    (it would unscale them itself), in the middle of the first step: refused here instead.
    `optim.implementation=auto` takes foreach in that case (`zoo.tasks.optim.build_optimizer`)."""
    precision = str(zc.trainer.get("precision", "32-true"))
    clip = zc.trainer.get("gradient_clip_val") or 0
    if zc.optim.implementation == OptimizerImpl.fused and precision.endswith("-mixed") and float(clip) > 0:
        raise ConfigError(
            f"optim.implementation=fused cannot run with trainer.gradient_clip_val={clip} under "
            f"trainer.precision={precision} (Lightning does not clip a fused optimizer's gradients "
            "in mixed precision): use optim.implementation=auto or foreach, or "
            "trainer.gradient_clip_val=0"
        )


def _check_softcapped_loss(zc: ZooConfig) -> None:
    """Liger-Kernel's fused loss is called without a soft-cap here: a capped model's training loss
    would be of other logits than its validation and generation."""
    if zc.task.output_loss == OutputLoss.liger and zc.model.final_softcap is not None:
        raise ConfigError(
            f"task.output_loss=liger does not cap the logits (model.final_softcap="
            f"{zc.model.final_softcap:g}): use task.output_loss=auto, logits or chunked"
        )


def _check_sharding(zc: ZooConfig) -> None:
    """Combinations the sharded strategy cannot run, refused before any process starts."""
    strategy = zc.trainer.get("strategy")
    if not is_sharded_name(strategy):
        return
    precision = str(zc.trainer.get("precision", "32-true"))
    if precision not in SHARDED_PRECISIONS:
        raise ConfigError(
            f"trainer.strategy={strategy} runs trainer.precision in ({', '.join(SHARDED_PRECISIONS)}), "
            f"got {precision} (float16 mixed precision needs a gradient scaler that sharded "
            f"training here has not; use bf16-mixed)"
        )


def _check_optimizer(zc: ZooConfig) -> None:
    """The chosen optimizer's refusals (its row in `zoo.config.facts.optimizers`), before any
    weight exists."""
    strategy = zc.trainer.get("strategy")
    shape = RunShape(
        strategy=strategy if isinstance(strategy, str) else None,
        sharded=is_sharded_name(strategy),
        parametrization=zc.model.parametrization.value,
    )
    refusal = optimizer_refusal(zc.optim.kind, shape)
    if refusal is not None:
        raise ConfigError(refusal)


def _check_branch(zc: ZooConfig) -> None:
    """branch_from starts a WSD cooldown of scheduler.decay_steps at the checkpoint's step, in a
    run directory of its own (`zoo.training.resume.branch`)."""
    if zc.branch_from is None:
        return
    if zc.ckpt_path is not None or zc.init_from is not None:
        raise ConfigError(
            "branch_from starts a run from another run's checkpoint: it cannot be combined with ckpt_path or init_from"
        )
    if zc.scheduler.kind.value != "wsd" or zc.scheduler.decay_steps is None:
        raise ConfigError(
            "branch_from branches a cooldown off a stable phase: it needs scheduler=wsd and "
            "scheduler.decay_steps (the cooldown's length from the branch step)"
        )


def _check_mtp(zc: ZooConfig) -> None:
    """task.mtp_depth's refusals that join the task with the model, trainer and data (its row in
    `zoo.config.facts.mtp`)."""
    refusal = mtp_refusal(
        zc.task.mtp_depth,
        parametrization=zc.model.parametrization.value,
        sharded=is_sharded_name(zc.trainer.get("strategy")),
        document_mask=zc.data.document_mask,
        seq_len=zc.data.seq_len,
    )
    if refusal is not None:
        raise ConfigError(refusal)


def _check_batch(zc: ZooConfig) -> None:
    if zc.trainer.get("overfit_batches") not in (None, 0, 0.0):
        raise ConfigError(
            "trainer.overfit_batches is not supported: the training loader keeps its "
            "place for exact resume; use data.max_examples for a small training set"
        )
    devices, nodes = zc.trainer.get("devices", 1), zc.trainer.get("num_nodes", 1)
    if isinstance(devices, int) and devices > 0 and isinstance(nodes, int) and nodes > 0:
        per_device_batch(zc.data.global_batch_size, devices * nodes)  # before any process starts


MOST_STEPS = 10**12  # trainer.max_steps and trainer.max_epochs at most


def _check_schedule(zc: ZooConfig) -> None:
    max_steps = zc.trainer.get("max_steps", -1)
    if max_steps in (None, -1) and zc.trainer.get("max_epochs", -1) in (None, -1):
        raise ConfigError("set trainer.max_steps or trainer.max_epochs, or the run never ends")
    if isinstance(max_steps, int) and (max_steps == 0 or max_steps < -1):
        raise ConfigError(
            f"trainer.max_steps must be a positive number of steps (or -1 to train by "
            f"trainer.max_epochs), got {max_steps}"
        )
    for key in ("max_steps", "max_epochs"):  # past this, Lightning's counters and time estimates overflow
        value = zc.trainer.get(key)
        if isinstance(value, int) and value > MOST_STEPS:
            raise ConfigError(
                f"trainer.{key}={value} is past what a run can count: at most {MOST_STEPS:,} "
                f"(two million years at a step a minute)"
            )
    check_schedule_length(zc.scheduler, max_steps if max_steps and max_steps > 0 else None)
    if zc.scheduler.kind == ScheduleKind.inverse_sqrt:
        w, d = zc.scheduler.warmup_steps, zc.model.base_d_model  # under mup the base width
        width = "d_model" if d == zc.model.d_model else "mup_base_d_model"
        peak = zc.optim.lr * d**-0.5 * w**-0.5
        if peak < 1e-5:
            raise ConfigError(
                f"scheduler=inverse_sqrt peaks at optim.lr x {width}^-0.5 x warmup^-0.5 = "
                f"{zc.optim.lr:g} x {d}^-0.5 x {w}^-0.5 = {peak:.2g}; optim.lr multiplies the "
                f"schedule (the paper's rate is optim.lr=1.0, as in optim=adam)"
            )


def _schedule_length_fix(total: int | None, cfg: SchedulerConfig) -> str:
    """What makes a schedule outlast its warmup: a length for one that has none, a shorter warmup
    where one fits, else a run longer than the warmup (a run of 1 step has no room for one)."""
    if not total:
        return "give scheduler.total_steps, or trainer.max_steps"
    if total > 1:
        return (
            f"add scheduler.warmup_steps={max(1, total // 10)} (a tenth of the run), or run -cn quick, "
            "whose warmup follows trainer.max_steps"
        )
    which = "scheduler.total_steps" if cfg.total_steps else "trainer.max_steps"
    return f"give {which}={cfg.warmup_steps + 1} or more, or scheduler.warmup_steps=0, or scheduler=constant"


def check_schedule_length(cfg: SchedulerConfig, total_steps: int | None) -> None:
    """A schedule that decays over a total length (its row's `needs_total`: scheduler.total_steps
    or trainer.max_steps) must outlast its warmup; a WSD cooldown must begin after the warmup."""
    if not SCHEDULE_FACTS[cfg.kind].needs_total:
        return
    total = cfg.total_steps or total_steps
    name = cfg.kind.value
    if not total or total <= cfg.warmup_steps:
        raise ConfigError(
            f"scheduler={name} needs total steps (scheduler.total_steps or trainer.max_steps) "
            f"greater than scheduler.warmup_steps ({cfg.warmup_steps}), got {total}: "
            f"{_schedule_length_fix(total, cfg)}"
        )
    if cfg.kind == ScheduleKind.wsd:
        decay = wsd_decay_steps(total, cfg.decay_steps, cfg.decay_fraction)
        if total - decay < cfg.warmup_steps:
            raise ConfigError(
                f"scheduler=wsd's cooldown of {decay} steps would begin at step {total - decay}, "
                f"before its warmup of {cfg.warmup_steps} steps ends (total {total}): lower "
                f"scheduler.decay_steps or scheduler.decay_fraction"
            )


def _check_ramps(zc: ZooConfig) -> None:
    """data.batch_warmup / data.seq_len_warmup: a packed causal task, and (the devices known
    before any process starts) every batch of the ramp split into accumulation x ranks."""
    check_ramp_task(zc.data, zc.task.kind.value, task_spec(zc.task.kind).collate == Collate.causal)
    devices, nodes = zc.trainer.get("devices", 1), zc.trainer.get("num_nodes", 1)
    if zc.data.batch_warmup is not None and isinstance(devices, int) and devices > 0 and isinstance(nodes, int):
        world = devices * max(nodes, 1)
        _, accumulation = per_device_batch(zc.data.global_batch_size, world, zc.data.max_device_batch_size)
        micro_batches(zc.data.batch_warmup, world, accumulation)
