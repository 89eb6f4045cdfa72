"""The `${zoo.*}` resolvers a config may call, and the one start time of a run they read.

Every process of a multi-process run composes the config itself: Lightning's own launcher
starts `zoo-train` again for ranks 1..N-1, torchrun and srun start it once per rank. Each
would resolve `${now:...}` in `hydra.run.dir` from its own clock and could land in a
directory of its own. So `hydra.run.dir` uses `${zoo.now:FMT}`, a start time fixed once per run
and shared (Hydra registers its own `${now:}` again when it starts, so zoo's is a name of its
own):

1. `ZOO_RUN_TIME` in the environment (set by the first process; inherited by the ranks
   Lightning starts and by SLURM jobs that sweeps submit, so a requeued job finds it too);
2. under torchrun, the first rank to ask stores its time in the rendezvous store of torchrun's
   agent (`MASTER_ADDR:MASTER_PORT`) and every rank, on every node, reads that one;
3. in a SLURM job step of several tasks, the job's start time plus the step number in seconds
   (`SLURM_JOB_START_TIME + SLURM_STEP_ID`: every task of a step agrees, consecutive `srun`
   steps of one job get directories of their own);
4. otherwise this process's clock.

The resolvers registered here also give each rank a log file of its own in the run directory
(`train.log` for rank 0, `train.rankR.log` for the others) and keep Hydra's `.hydra/` files to
rank 0.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from omegaconf import OmegaConf

from zoo.config.safety.hydra_section import job_subdir
from zoo.config.schema.convert import as_model_config
from zoo.config.schema.params import steps_for_tokens
from zoo.run.rank import launch_rank

RUN_TIME_ENV = "ZOO_RUN_TIME"
STORE_KEY = "zoo/run_time"


def _from_torchrun_store(mine: str) -> str | None:
    env = os.environ
    if not (env.get("TORCHELASTIC_RUN_ID") and env.get("MASTER_ADDR") and env.get("MASTER_PORT")):
        return None
    # only the store torchrun's agent hosts is there before the workers start
    if env.get("TORCHELASTIC_USE_AGENT_STORE") != "True" or int(env.get("WORLD_SIZE", "1")) < 2:
        return None
    from torch.distributed import TCPStore

    try:
        store = TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False, timeout=timedelta(seconds=60))
        # the store lives as long as torchrun's agent: the first writer wins, and every rank of
        # every restart of this torchrun job reads the same time (so a restart resumes in place)
        agreed = store.compare_set(STORE_KEY, "", mine)
    except (RuntimeError, OSError):  # no store after all: each rank keeps its own clock
        return None
    return agreed.decode() if isinstance(agreed, bytes) else str(agreed)


def _from_slurm_step() -> str | None:
    env = os.environ
    start = env.get("SLURM_JOB_START_TIME", "")
    step = env.get("SLURM_STEP_ID", "")
    if start.isdigit() and step.isdigit() and int(env.get("SLURM_NTASKS", "1") or 1) > 1:
        return datetime.fromtimestamp(int(start) + int(step)).isoformat()
    return None


def agree_run_time() -> str:
    """The run's start time (ISO format), the same in every process of the run; also put in
    the environment for processes this one starts."""
    agreed = os.environ.get(RUN_TIME_ENV)
    if not agreed:
        mine = datetime.now().isoformat(timespec="seconds")
        agreed = _from_torchrun_store(mine) or _from_slurm_step() or mine
        os.environ[RUN_TIME_ENV] = agreed
    return agreed


def _now(pattern: str) -> str:
    stamp = os.environ.get(RUN_TIME_ENV)
    moment = datetime.fromisoformat(stamp) if stamp else datetime.now()
    return moment.strftime(pattern)


def _rank_log(stem: str) -> str:
    rank = launch_rank()
    return f"{stem}.log" if rank == 0 else f"{stem}.rank{rank}.log"


def _rank_zero(value):
    return value if launch_rank() == 0 else None


def _tasks_per_node(devices) -> int:
    """SLURM tasks per node for `trainer.devices` (Lightning runs one task per device)."""
    if isinstance(devices, int) and devices > 0:
        return devices
    if isinstance(devices, str) and devices.isdigit() and int(devices) > 0:
        return int(devices)
    if isinstance(devices, (list, tuple)) or OmegaConf.is_list(devices):
        return len(devices)
    raise ValueError(f"hydra/launcher=slurm needs trainer.devices as a number of devices per node, got {devices!r}")


def _gpus_per_node(accelerator, devices) -> int | None:
    return _tasks_per_node(devices) if str(accelerator) in ("gpu", "cuda") else None


def _steps_for_tokens(tokens_per_param, _root_) -> int:
    """`${zoo.steps_for_tokens:R}`: the trainer.max_steps that trains this config's model on R
    tokens per non-embedding parameter at data.global_batch_size × data.seq_len tokens a step
    (a size grid's training budget by one rule, e.g. in recipes/scale_glu.yaml)."""
    data = _root_.data
    return steps_for_tokens(
        as_model_config(_root_.model), float(tokens_per_param), int(data.global_batch_size) * int(data.seq_len)
    )


def _share_of_steps(share, _root_) -> int:
    """`${zoo.share_of_steps:F}`: F x trainer.max_steps, rounded down, at least 1 (a warmup or a
    validation interval that fits any run length, e.g. in recipes/quick.yaml)."""
    share = float(share)
    if not 0 < share <= 1:
        raise ValueError(f"zoo.share_of_steps takes a share in (0, 1], got {share:g}")
    steps = int(_root_.trainer.max_steps)
    if steps < 1:
        raise ValueError(f"zoo.share_of_steps needs trainer.max_steps >= 1, got {steps}")
    return max(1, int(share * steps))


def _branch_end(_root_) -> int:
    """`${zoo.branch_end:}`: the step at which a branch's cooldown ends, the step of the
    checkpoint `branch_from` names plus scheduler.decay_steps (trainer.max_steps of a branch,
    so that a sweep over decay_steps gives each branch its own length)."""
    from zoo.training.resume.branch import branch_step  # torch: only when a branch is composed

    if _root_.get("branch_from") is None or _root_.scheduler.get("decay_steps") is None:
        raise ValueError("zoo.branch_end needs branch_from and scheduler.decay_steps")
    return branch_step(str(_root_.branch_from)) + int(_root_.scheduler.decay_steps)


def _job_subdir(resolved) -> str:
    """`${zoo.job_subdir:SUBDIR}`: SUBDIR, resolved for the job whose directory Hydra is about to
    make, when it lies inside the sweep directory; a refusal otherwise. zoo-train gives Hydra a
    sweep's `hydra.sweep.subdir` through it (`zoo.cli.gate.subdir_override`), so each job's
    directory is checked after interpolation, where it is made."""
    return job_subdir(resolved)


def register_resolvers() -> None:
    """`${zoo.now:FMT}` (the run's agreed start time), `${zoo.rank_log:STEM}`,
    `${zoo.rank_zero:VALUE}` (VALUE on rank 0, null elsewhere), the SLURM job shape from
    the trainer: `${zoo.tasks_per_node:DEVICES}`, `${zoo.gpus_per_node:ACCELERATOR,DEVICES}`,
    a training budget by a rule: `${zoo.steps_for_tokens:TOKENS_PER_PARAM}`, and a number of steps
    that follows the run's length: `${zoo.share_of_steps:SHARE}`, and where a branched cooldown
    ends: `${zoo.branch_end:}`, and a job's directory checked to lie in its sweep's:
    `${zoo.job_subdir:SUBDIR}`."""
    OmegaConf.register_new_resolver("zoo.now", _now, use_cache=True, replace=True)
    OmegaConf.register_new_resolver("zoo.rank_log", _rank_log, replace=True)
    OmegaConf.register_new_resolver("zoo.rank_zero", _rank_zero, replace=True)
    OmegaConf.register_new_resolver("zoo.tasks_per_node", _tasks_per_node, replace=True)
    OmegaConf.register_new_resolver("zoo.gpus_per_node", _gpus_per_node, replace=True)
    OmegaConf.register_new_resolver("zoo.steps_for_tokens", _steps_for_tokens, replace=True)
    OmegaConf.register_new_resolver("zoo.share_of_steps", _share_of_steps, replace=True)
    OmegaConf.register_new_resolver("zoo.branch_end", _branch_end, replace=True)
    OmegaConf.register_new_resolver("zoo.job_subdir", _job_subdir, replace=True)
