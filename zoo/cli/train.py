"""`zoo-train`: compose conf/ with command-line overrides and train.

    zoo-train                                   # the embedded default
    zoo-train model=llama model/position=alibi trainer.max_steps=100
    zoo-train -m model/position=rope,alibi seed=0,1   # a sweep
"""

from __future__ import annotations

from datetime import datetime
import os
import sys
import time
from pathlib import Path
from typing import Optional

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from zoo.cli.launch import RUN_TIME_ENV, SUBMITIT_FOLDER_ENV, agree_run_time, launch_rank, register_resolvers
from zoo.config.paths import CONFIG_NAME, config_source
from zoo.config.rundir import RunDir
from zoo.config.store import register_configs

# at import, not only in main(): a SLURM job of a sweep unpickles `_train` and resolves the
# config without running main()
register_resolvers()


def _fail(message: str, status: int = 2) -> None:
    """One line on stderr; status 2 for bad input, 1 for a run that could not go on."""
    print(f"zoo-train: error: {message}", file=sys.stderr)
    sys.exit(status)


class ArmFailed(RuntimeError):
    """One job of a sweep stopped; Hydra records it as failed and runs the other arms."""


def _resume_command(run_dir: Path) -> str:
    """This command again, in its run directory: what continues an interrupted run. It names the
    recipe (-cn) and config directory (-cd) the run was composed from, and a job of a sweep is
    resumed as one run (hydra.mode=RUN: a sweep recipe would otherwise start a new sweep)."""
    import shlex

    from hydra.types import RunMode

    hydra_cfg = HydraConfig.get()
    words = ["zoo-train"]
    for source in hydra_cfg.runtime.config_sources:
        if source.provider == "command-line" and source.schema == "file":  # -cd DIR (path without file://)
            words += ["-cd", str(source.path)]
    if hydra_cfg.job.config_name and hydra_cfg.job.config_name != CONFIG_NAME:
        words += ["-cn", hydra_cfg.job.config_name]
    overrides = [o for o in hydra_cfg.overrides.task if not o.startswith(("hydra.run.dir=", "hydra.mode="))]
    if hydra_cfg.mode == RunMode.MULTIRUN:
        overrides.append("hydra.mode=RUN")
    return " ".join([*map(shlex.quote, words), *map(shlex.quote, overrides), shlex.quote(f"hydra.run.dir={run_dir}")])


def _say_interrupted(outcome) -> None:
    """The one line of a run a signal stopped, with the command that resumes it (rank 0)."""
    if launch_rank() == 0:
        print(f"zoo-train: {outcome.message}; resume with: {outcome.failure.resume}", file=sys.stderr, flush=True)


def _arm_failed(run_dir: Path, message: str) -> None:
    """In a sweep, raise ArmFailed instead of exiting (its failed.json is written), so the sweep
    goes on with its other arms and exits non-zero when they are done."""
    from hydra.types import RunMode

    if HydraConfig.get().mode == RunMode.MULTIRUN:
        print(f"zoo-train: error: {run_dir}: {message}", file=sys.stderr)
        raise ArmFailed(message) from None


def _lock_sweep_job(run_dir: Path) -> bool:
    """A job of a sweep takes its own directory's lock (a single run's is taken in main, before
    Hydra writes); a directory a live job owns fails this arm, and the sweep goes on."""
    from hydra.types import RunMode

    from zoo.run.lock import ForeignRunDir, RunDirBusy, acquire

    if HydraConfig.get().mode != RunMode.MULTIRUN or launch_rank() != 0:
        return False
    try:
        acquire(run_dir)
    except (RunDirBusy, ForeignRunDir) as exc:
        print(f"zoo-train: error: {exc}", file=sys.stderr)
        raise ArmFailed(str(exc)) from None
    return True


@hydra.main(config_path=config_source(), config_name=CONFIG_NAME, version_base="1.3")
def _train(cfg: DictConfig) -> float | None:
    """One run, or one job of a sweep: a job that fails has written its failed.json and said so
    on one line; the sweep goes on, and main() ends it with one summary line."""
    try:
        return _train_job(cfg)
    except ArmFailed:
        return None


def _train_job(cfg: DictConfig) -> float | None:
    from zoo.run import Outcome, train

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    job_lock = _lock_sweep_job(run_dir)
    try:
        outcome = train(cfg, run_dir, lock=False, resume_command=lambda: _resume_command(run_dir),
                        on_stuck=_say_interrupted)
    except Exception as exc:  # a bug: recorded in failed.json; a sweep goes on with its other arms
        _arm_failed(run_dir, f"{type(exc).__name__}: {exc}")
        raise
    finally:
        if job_lock:
            from zoo.run.lock import release

            release(run_dir)
    if outcome.kind == Outcome.INTERRUPTED:  # saved; the whole command stops
        _say_interrupted(outcome)
        sys.exit(outcome.exit_status)
    if outcome.kind in (Outcome.STOPPED, Outcome.REFUSED):
        _arm_failed(run_dir, outcome.message)
        _fail(outcome.message, status=outcome.exit_status)
        return None
    summary = outcome.summary
    if summary.get("status") == "requeued":
        if outcome.is_global_zero:
            print(f"run directory: {run_dir}  requeued at step {summary['global_step']} "
                  f"(resumes from {summary['last_checkpoint']})")
        if os.environ.get(SUBMITIT_FOLDER_ENV):
            # A sweep's SLURM job: submitit records a job as done when its function returns, and
            # the sweep would end with this arm half trained. Leaving without a return value
            # leaves no result, and the sweep waits for the job SLURM starts again.
            sys.exit(0)
        return None
    if not outcome.is_global_zero:  # one report per run, from rank 0
        return None
    metrics = summary["metrics"]
    line = f"run directory: {run_dir}"
    if "val/loss" in metrics:
        line += f"  val/loss {metrics['val/loss']:.4g}"
    for key in ("val/ppl", "val/accuracy", "val/bleu", "val/exact_match"):
        if key in metrics:
            line += f"  {key} {metrics[key]:.4g}"
    print(line)
    if "baseline" in summary:
        print(f"unigram baseline val/loss {summary['baseline']['unigram_val_loss']:.4f}")
    if "sample" in summary:
        print(f"sample: {summary['sample']!r}")
    return metrics.get("val/loss")


def _check_overrides(argv: list[str]) -> Optional[tuple[Path, bool, DictConfig]]:
    """Compose before Hydra does, so that a bad key, value or combination is reported on one
    line (Hydra's own report spans several), and so that no config, whatever its origin, gets
    Hydra to build an object outside zoo's allow-list (a launcher, sweeper, callback or logging
    handler named `os.system`). A sweep, from the command line or `hydra.sweeper.params`, is
    checked once per value of each swept key."""
    try:
        from hydra._internal.utils import get_args_parser
    except ImportError:  # pragma: no cover - private API moved
        return
    args, _ = get_args_parser().parse_known_args(argv)
    if args.shell_completion or args.info:
        return None
    if args.experimental_rerun:
        _fail("--experimental-rerun is refused: it unpickles a file, and pickles can run code")
    from omegaconf import OmegaConf

    from zoo.cli.compose import compose
    from zoo.config.errors import ConfigError

    source = None
    if args.config_path:
        source = args.config_path if args.config_path.startswith("pkg://") else \
            str((Path(__file__).parent / args.config_path).resolve())  # as Hydra resolves it
    name = args.config_name or CONFIG_NAME
    dirs = [args.config_dir] if args.config_dir else []
    help_only = args.help or args.hydra_help
    try:
        base = compose(_sweep_variants(args.overrides)[0], config_name=name, config_source_dir=source,
                       config_dirs=dirs, return_hydra_config=True, check=False)
        params = OmegaConf.select(base, "hydra.sweeper.params", default=None)
        params = OmegaConf.to_container(params, resolve=False) if params is not None else {}
        swept = [f"{key}={value}" for key, value in params.items()]
        multirun = args.multirun or str(OmegaConf.select(base, "hydra.mode", default="")) == "RunMode.MULTIRUN"
        for variant in _sweep_variants(swept + list(args.overrides)):
            cfg = compose(variant, config_name=name, config_source_dir=source, config_dirs=dirs,
                          return_hydra_config=True, check=not (multirun or args.cfg or help_only))
            if multirun and not help_only and "launcher" in cfg.hydra:
                _resolve_launcher(cfg)
    except ConfigError as exc:
        _fail(str(exc))
    if args.cfg or help_only:
        return None
    if multirun:  # each job locks its own directory; here only the sweep's default name is claimed
        planned = _planned_run_dir(cfg, "sweep", "multirun")
        return (*planned, None) if planned is not None else None
    planned = _planned_run_dir(cfg)
    return (*planned, cfg) if planned is not None else None


def _planned_run_dir(cfg, mode: str = "run", root: str = "runs") -> Optional[tuple[Path, bool]]:
    """(the run (or sweep) directory Hydra will use, whether it is other than the default
    ROOT/DATE/TIME)."""

    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        planned = OmegaConf.select(cfg, f"hydra.{mode}.dir")
    except (OmegaConfBaseException, ValueError):
        return None
    if not planned:
        return None
    start = datetime.fromisoformat(os.environ[RUN_TIME_ENV])
    default = Path(root) / start.strftime("%Y-%m-%d") / start.strftime("%H-%M-%S")
    return Path(planned), Path(planned) != default


def _resolve_launcher(cfg) -> None:
    """The launcher's settings derive from the trainer (hydra/launcher=slurm): resolve them
    now, so that e.g. trainer.devices=auto fails here on one line, not after the launch."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from zoo.config.errors import ConfigError, explain

    launcher = cfg.hydra.launcher
    for key in launcher.keys():
        text = OmegaConf.to_container(launcher, resolve=False)[key]
        if isinstance(text, str) and "${hydra" in text:
            continue  # resolved by Hydra when it runs
        try:
            launcher[key]
        except (OmegaConfBaseException, ValueError) as exc:
            raise ConfigError(f"hydra.launcher.{key}: {explain(exc)}") from None


def _sweep_variants(overrides: list[str]) -> list[list[str]]:
    """Single-valued override lists that together use every value of every swept key: the
    first value of each sweep, then each other value in turn. A sweep whose values cannot be
    listed before Hydra runs (glob, interval) is left out of the check."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # noqa: BLE001 - let compose report the syntax error on one line
        return [overrides]
    choices = []
    for text, o in zip(overrides, parsed):
        if o.is_sweep_override():
            key = o.get_key_element()
            try:
                values = [f"{key}={v}" for v in o.sweep_string_iterator()]
            except Exception:  # noqa: BLE001 - glob(...) / interval(...) need Hydra's loader
                continue
            choices.append(values or [text])
        else:
            choices.append([text])
    first = [c[0] for c in choices]
    variants = [first]
    for i, values in enumerate(choices):
        for v in values[1:]:
            variants.append(first[:i] + [v] + first[i + 1:])
    return variants


def _latest_run_of(cfg, default: Path) -> Path:
    """`ckpt_path=last` without a run directory: the most recently saved run under runs/ that
    this command describes (the same check as any resume), whose owner is not running."""
    from zoo.training.checkpoint.files import CheckpointError
    from zoo.run.lock import owner_of, runs_with_checkpoints, _alive
    from zoo.config.errors import ConfigError
    from zoo.config.validate import validate
    from zoo.training.run import check_resume_config

    root = default.parent.parent
    try:
        spec = validate(cfg)
    except ConfigError as exc:
        _fail(str(exc))
    candidates = runs_with_checkpoints(root)
    for run in candidates:
        owner = owner_of(run)
        if owner and _alive(owner):
            continue
        try:
            check_resume_config(str(RunDir(run).last), spec)
        except (ConfigError, CheckpointError):
            continue
        print(f"zoo-train: ckpt_path=last resumes {run}", file=sys.stderr)
        return run
    if not candidates:
        _fail(f"ckpt_path=last: no run under {root}/ has a checkpoints/last.ckpt; start a run first, or "
              f"give hydra.run.dir=DIR of the run to resume")
    _fail(f"ckpt_path=last: none of the {len(candidates)} run(s) under {root}/ with a checkpoint was made "
          f"by this command (model, data, tokenizer, task, optimizer and schedule must match); give "
          f"hydra.run.dir=DIR to name one")


def _claim(plan: Optional[tuple[Path, bool, DictConfig]], shared: bool) -> Optional[Path]:
    """The first process of a run takes its directory (`zoo.run.lock`); a default name taken
    by a run started in the same second becomes runs/DATE/TIME-N for this whole run. A directory
    that holds a run is continued only by a command that describes that run: checked here,
    before Hydra writes its .hydra/ files into it."""
    from zoo.run.lock import ForeignRunDir, RunDirBusy, acquire, claim_default, release
    from zoo.config.errors import ConfigError
    from zoo.config.validate import validate

    if plan is None or launch_rank() != 0:
        return None
    run_dir, explicit, cfg = plan
    if cfg is not None and not explicit and not shared and cfg.get("ckpt_path") == "last":
        run_dir, explicit = _latest_run_of(cfg, run_dir), True
        sys.argv.append(f"hydra.run.dir={run_dir}")
    if cfg is None:  # a sweep: two sweeps started in the same second get a directory each
        global _SWEEP_DIR
        if not explicit and not shared:
            try:
                claimed = claim_default(run_dir)
            except OSError as exc:
                _fail(f"sweep directory {run_dir}: {exc.strerror or exc}")
            if claimed != run_dir:
                sys.argv.append(f"hydra.sweep.dir={claimed}")
            run_dir = claimed
        _SWEEP_DIR = run_dir
        return None
    try:  # a command refused for its config (or this machine) leaves no directory behind
        spec = validate(cfg)
    except ConfigError as exc:  # before torch and Lightning load: a refusal answers in under a second
        _fail(str(exc))
    from zoo.config.data import DataSource
    from zoo.data.errors import DataError
    from zoo.data.files import check_local_paths

    if spec.data.source == DataSource.local:
        try:  # a missing, empty or unknown data file: refused before torch loads, no directory left
            check_local_paths(spec.data.path, spec.data.val_path)
        except DataError as exc:
            _fail(str(exc))
    from zoo.config.errors import CheckpointError
    from zoo.training.machine import check_machine

    try:
        check_machine(spec)
    except ConfigError as exc:
        _fail(str(exc))
    from zoo.training.run import check_resume_config, resolve_resume
    try:
        if not explicit and not shared:
            claimed = claim_default(run_dir)
            if claimed != run_dir:
                sys.argv.append(f"hydra.run.dir={claimed}")  # Hydra, and the ranks Lightning starts
            run_dir = claimed
        acquire(run_dir)
    except (RunDirBusy, ForeignRunDir) as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"run directory {run_dir}: {exc.strerror or exc}")
    try:
        resume = resolve_resume(spec.ckpt_path, run_dir)
        if resume is not None:
            check_resume_config(resume, spec)
    except (ConfigError, CheckpointError) as exc:  # the run's own errors are the run's to report
        from zoo.training.resume_check import ResumeMismatch

        if isinstance(exc, ResumeMismatch):
            release(run_dir)
            _fail(str(exc))
    return run_dir


_SWEEP_DIR: Optional[Path] = None  # the sweep this command runs, if it runs one


def _sweep_summary(since: float) -> None:
    """After a sweep: one line naming the arms that failed (their failed.json written during this
    sweep, by this process or by SLURM jobs), and exit status 1; nothing when all finished."""
    if _SWEEP_DIR is None or not _SWEEP_DIR.is_dir() or launch_rank() != 0:
        return
    failed = sorted(p for p in _SWEEP_DIR.glob(f"**/{RunDir.FAILED}") if p.stat().st_mtime >= since)
    jobs = [p.parent for p in _SWEEP_DIR.glob(f"**/{RunDir.HYDRA}/{RunDir.OVERRIDES}")]
    if failed:
        shown = ", ".join(str(p) for p in failed[:10]) + (" ..." if len(failed) > 10 else "")
        print(f"zoo-train: {len(failed)} of {len(jobs)} arm(s) of the sweep in {_SWEEP_DIR} failed; "
              f"see {shown}", file=sys.stderr)
        sys.exit(1)


def main() -> None:
    from zoo.run.lock import release
    from zoo.cli.tool import serve, wants_help
    from zoo.config.errors import ZooError

    if wants_help(sys.argv[1:]):  # zoo's help, from the schemas; Hydra's own is --hydra-help
        from zoo.cli.train_help import train_help

        _check_overrides(sys.argv[1:])  # a config naming code is refused before any help is shown

        serve("zoo-train", print, lambda: train_help(sys.argv[1:]))
        return
    global _SWEEP_DIR
    _SWEEP_DIR = None
    register_configs()
    inherited = RUN_TIME_ENV in os.environ
    if inherited:
        try:
            datetime.fromisoformat(os.environ[RUN_TIME_ENV])
        except ValueError:
            _fail(f"{RUN_TIME_ENV}={os.environ[RUN_TIME_ENV]!r} is not a start time (ISO format, e.g. "
                  f"2026-11-26T10:00:00); zoo-train sets it for the processes of one run: unset it")
    agree_run_time()  # one start time, hence one run directory, for every rank of this run
    # a start time shared with other processes (a launcher's ranks, torchrun's store, a SLURM
    # step, a requeued job) names a directory they share: never renamed
    shared = inherited or "TORCHELASTIC_RUN_ID" in os.environ or int(os.environ.get("SLURM_NTASKS", "1") or 1) > 1
    started = time.time()
    owned = None
    argv = list(sys.argv)
    try:
        owned = _claim(_check_overrides(sys.argv[1:]), shared)
        _train()
        _sweep_summary(started - 1)
    except KeyboardInterrupt:  # before training started, or a second Ctrl-C: nothing more to save
        if launch_rank() == 0:
            print("zoo-train: interrupted", file=sys.stderr)
        sys.exit(130)
    except ZooError as exc:  # one the steps above did not report themselves
        _fail(str(exc))
    finally:
        if owned is not None:
            release(owned)
        if not inherited:  # a later run in this process gets a time of its own
            os.environ.pop(RUN_TIME_ENV, None)
        sys.argv[:] = argv  # the directory it chose (hydra.*.dir=) is not the next run's


if __name__ == "__main__":
    main()
