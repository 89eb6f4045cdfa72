"""`zoo-train`: compose conf/ with command-line overrides and train.

    zoo-train                                   # the embedded default
    zoo-train model=llama model/position=alibi trainer.max_steps=100
    zoo-train -m model/position=rope,alibi seed=0,1   # a sweep

Every key and its default: `zoo-train --help`; a recipe: `zoo-train -cn NAME`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import NoReturn

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from zoo.cli.gate import (
    check_command_line,
    claim_single,
    claim_sweep,
    dir_override,
    refuse_flags,
    subdir_override,
)
from zoo.cli.hydra_args import HydraArgs, config_source_of, in_one_group, parse_hydra_args, with_overrides
from zoo.cli.hydra_job import composed_by_hydra, in_sweep, job_dir, run_claimed, run_origin, runs_as_claimed
from zoo.cli.objective import objective
from zoo.config.paths import CONFIG_NAME, config_source, use_recipes
from zoo.config.records.rundir import RunDir
from zoo.config.schema.store import register_configs
from zoo.run.rank import launch_rank
from zoo.run.resolvers import RUN_TIME_ENV, agree_run_time, register_resolvers
from zoo.training.signals import command

FULL_ERROR_ENV = "HYDRA_FULL_ERROR"
SUBMITIT_FOLDER_ENV = "SUBMITIT_FOLDER"  # set in the jobs submitit runs (hydra/launcher=slurm)

# at import, not only in main(): a SLURM job of a sweep unpickles the task function and
# resolves the config without running main()
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
    hydra_cfg = HydraConfig.get()
    config_dirs = [
        str(source.path)
        for source in hydra_cfg.runtime.config_sources
        if source.provider == "command-line" and source.schema == "file"  # -cd DIR (path without file://)
    ]
    return _command(
        config_dirs,
        hydra_cfg.job.config_name,
        list(hydra_cfg.overrides.task),
        hydra_cfg.mode == RunMode.MULTIRUN,
        run_dir,
    )


def _claimed_resume_command(args: HydraArgs, run_dir: Path) -> str:
    """`_resume_command` before Hydra's job has started, from the command line: the run's
    overrides are those Hydra gives its job (all but the hydra.* ones)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(args.overrides))
    task = [o.input_line for o in parsed if not o.is_hydra_override() and o.input_line is not None]
    config_dirs = [os.path.abspath(args.config_dir)] if args.config_dir else []
    return _command(config_dirs, args.config_name, task, False, run_dir)


def _command(config_dirs: list[str], config_name: str | None, task: list[str], multirun: bool, run_dir: Path) -> str:
    import shlex

    words = ["zoo-train"]
    for directory in config_dirs:
        words += ["-cd", directory]
    if config_name and config_name != CONFIG_NAME:
        words += ["-cn", config_name]
    overrides = [o for o in task if not o.startswith(("hydra.run.dir=", "hydra.mode="))]
    if multirun:
        overrides.append("hydra.mode=RUN")
    return " ".join([*map(shlex.quote, words), *map(shlex.quote, overrides), shlex.quote(dir_override("run", run_dir))])


def _say_interrupted(outcome) -> None:
    """The one line of a run a signal stopped, with the command that resumes it (rank 0)."""
    if launch_rank() == 0:
        print(f"zoo-train: {outcome.message}; resume with: {outcome.failure.resume}", file=sys.stderr, flush=True)


def _arm_failed(run_dir: Path, message: str) -> None:
    """In a sweep, raise ArmFailed instead of exiting (its failed.json is written), so the sweep
    goes on with its other arms and exits non-zero when they are done."""
    if in_sweep():
        print(f"zoo-train: error: {run_dir}: {message}", file=sys.stderr)
        raise ArmFailed(message) from None


def _hydra_app(claim):
    """zoo-train's Hydra application: Hydra composes, writes .hydra/ and runs each job; a job
    runs `claim` (the single run main() claimed before Hydra started) or, for a job of a
    sweep and a rank a launcher started, claims its own. A job that fails has written its
    failed.json and said so on one line; a sweep goes on, and main() ends it with one line."""
    use_recipes()  # -cn NAME, however zoo is installed

    @hydra.main(config_path=config_source(), config_name=CONFIG_NAME, version_base="1.3")
    def zoo_train(cfg: DictConfig) -> float | None:
        try:
            return _train_job(cfg, claim)
        except ArmFailed:
            return None

    return zoo_train


def _run_claimed(claim, cfg: DictConfig, args: HydraArgs):
    """The run main() claimed (None: a rank's) as Hydra's job of the composition checked (`run_claimed`)."""

    def job() -> None:
        run_claimed(
            cfg,
            claim.run_dir if claim is not None else None,
            lambda composed: _train_job(composed, claim),
            finished=claim is not None and claim.finished is not None,
            primary=config_source_of(args) or config_source(),
            config_dirs=[args.config_dir] if args.config_dir else [],
        )

    return job


def _train_job(cfg: DictConfig, claim) -> float | None:
    from zoo.cli.compose import with_init_from
    from zoo.run.lifecycle import execute, refused
    from zoo.run.outcome import Outcome
    from zoo.run.preflight import RunRefused, claim_run

    origin, run_dir = run_origin(), job_dir()
    try:
        with command.holding():  # a stop during the claim is answered once it is claimed
            if claim is None:  # Hydra's composition, finished as zoo.compose finishes its own
                cfg = with_init_from(cfg, list(origin.overrides))
                # a job of a sweep takes its own directory's lock; a rank shares its run's
                claim = claim_run(cfg, run_dir, lock=in_sweep(), record_refusals=True)
            else:  # the run main() claimed trains the config Hydra composed and recorded in .hydra/
                claim = composed_by_hydra(claim, cfg)
            # a stop from here is recorded (a finished run's records are kept)
            command.claimed(run_dir, _resume_command(run_dir), finished=claim.finished is not None)
        outcome = execute(
            claim, origin=origin, resume_command=lambda: _resume_command(run_dir), on_stuck=_say_interrupted
        )
    except RunRefused as exc:
        outcome = refused(run_dir, exc)
    except Exception as exc:  # a bug: recorded in failed.json; a sweep goes on with its other arms
        _arm_failed(run_dir, f"{type(exc).__name__}: {exc}")
        raise
    if outcome.kind == Outcome.INTERRUPTED:  # saved; the whole command stops
        _say_interrupted(outcome)
        sys.exit(outcome.exit_status)
    if outcome.kind in (Outcome.STOPPED, Outcome.REFUSED):
        _arm_failed(run_dir, outcome.message)
        _fail(outcome.message, status=outcome.exit_status)
        return None
    if outcome.kind == Outcome.REQUEUED:
        if outcome.is_global_zero:
            print(
                f"run directory: {run_dir}  requeued at step {outcome.requeued.step} "
                f"(resumes from {outcome.requeued.last_checkpoint})"
            )
        if os.environ.get(SUBMITIT_FOLDER_ENV):
            # A sweep's SLURM job: submitit records a job as done when its function returns, and
            # the sweep would end with this arm half trained. Leaving without a return value
            # leaves no result, and the sweep waits for the job SLURM starts again.
            sys.exit(0)
        return None
    if not outcome.is_global_zero:  # one report per run, from rank 0
        return None
    summary = outcome.summary or {}  # a finished run's: summary.json
    metrics = summary.get("metrics", {})
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
    return objective(run_dir)  # the Optuna sweeper's score: read from the record zoo-compare reads


def _sweep_summary(sweep_dir: Path | None, since: float) -> None:
    """After a sweep: one line naming the arms that failed (their failed.json written during this
    sweep, by this process or by SLURM jobs), and exit status 1; nothing when all finished."""
    if sweep_dir is None or not sweep_dir.is_dir() or launch_rank() != 0:
        return
    failed = sorted(p for p in sweep_dir.glob(f"**/{RunDir.FAILED}") if p.stat().st_mtime >= since)
    jobs = [p.parent for p in sweep_dir.glob(f"**/{RunDir.HYDRA}/{RunDir.OVERRIDES}")]
    if failed:
        shown = ", ".join(str(p) for p in failed[:10]) + (" ..." if len(failed) > 10 else "")
        print(
            f"zoo-train: {len(failed)} of {len(jobs)} arm(s) of the sweep in {sweep_dir} failed; see {shown}",
            file=sys.stderr,
        )
        sys.exit(1)


def _drop_if_empty(sweep_dir: Path, since: float) -> None:
    """A sweep directory this command made that the stopped sweep left empty (its sweeper
    refused before any job ran): removed, so a refused sweep leaves nothing behind."""
    try:
        if sweep_dir.is_dir() and sweep_dir.stat().st_mtime >= since and not any(sweep_dir.iterdir()):
            sweep_dir.rmdir()
    except OSError:
        pass


def _run_hydra(app, sweep_dir: Path | None, since: float) -> None:
    """Hydra's application `app` (`_hydra_app`, `_run_claimed`), with Hydra's own error report off
    (HYDRA_FULL_ERROR: what a sweeper raises reaches main(), e.g. Optuna's when no trial
    finished): a sweep that stops ends on one line and the line naming its failed arms; a bug in
    a single run shows its traceback."""
    from hydra.errors import HydraException

    from zoo.config.errors import ZooError, explain, zoo_error_in

    before = os.environ.get(FULL_ERROR_ENV)
    os.environ[FULL_ERROR_ENV] = "1"
    try:
        app()
    except (ZooError, KeyboardInterrupt):
        raise
    except HydraException as exc:
        _fail(explain(exc))
    except Exception as exc:
        refusal = zoo_error_in(exc)  # zoo's check inside Hydra, e.g. of a job's directory
        if refusal is not None:
            if sweep_dir is not None:
                _drop_if_empty(sweep_dir, since)
            raise refusal from None
        if sweep_dir is None:
            raise
        print(f"zoo-train: error: the sweep stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
        _sweep_summary(sweep_dir, since)  # the failed arms named last
        _drop_if_empty(sweep_dir, since)
        sys.exit(1)
    finally:
        if before is None:
            os.environ.pop(FULL_ERROR_ENV, None)
        else:
            os.environ[FULL_ERROR_ENV] = before


def main(argv: list[str] | None = None) -> None:
    """zoo-train with the arguments `argv` (`zoo train ARGS`); None: this process's command line.
    A claimed single run is Hydra's job of zoo's own composition; for the rest, `hydra.main` reads
    its command line from `sys.argv` alone, so `_main` hands it there (and puts it back after)."""
    words = list(sys.argv) if argv is None else ["zoo-train", *argv]
    # from the first line to the last, SIGTERM and Ctrl-C end the command with one line and 128 +
    # the signal (a run's own handler answers them from its preparation to its final validation)
    with command.answering():
        try:
            _main(words)
        except (command.Stopped, KeyboardInterrupt) as exc:
            _stopped(getattr(exc, "signum", signal.SIGINT))


def _stopped(signum: int) -> NoReturn:
    """A stop outside the run's handler: the one line, and, once a run directory is claimed,
    failed.json with the command that resumes (a run whose summary.json is written keeps its
    records). A second signal meanwhile ends the command the same way."""
    name = signal.Signals(signum).name
    with contextlib.suppress(command.Stopped), command.holding():
        claim = command.current()
        if claim is not None and not claim.finished:
            _say_interrupted(_record_stop(claim, signum))
        elif launch_rank() == 0:
            said = (
                f"after {claim.run_dir} finished; its records are kept, and the same command again does what is left"
                if claim is not None
                else "before a run directory was claimed; nothing was written"
            )
            print(f"zoo-train: stopped by {name} {said}", file=sys.stderr)
    sys.exit(128 + signum)


def _record_stop(claim: command.Claim, signum: int):
    """failed.json of the claimed run a signal stopped outside its handler, naming the step its
    last.ckpt holds (None: none, or none readable)."""
    from zoo.run.records import record_interrupted
    from zoo.training.stops import TrainingInterrupted

    last = RunDir(claim.run_dir).last
    step = None
    if last.is_file():
        from zoo.training.checkpoint.files import read_checkpoint

        try:
            step = read_checkpoint(last, weights=False)["global_step"]
        except Exception:  # noqa: BLE001 - the record of the stop is written all the same
            step = None
    why = f"{signal.Signals(signum).name} {claim.stage}"
    return record_interrupted(claim.run_dir, TrainingInterrupted(signum, step, last, why=why), lambda: claim.resume)


def _main(argv: list[str]) -> None:
    """zoo-train's command line `argv` (the program name first): checked and claimed, then run
    by Hydra."""
    from zoo.cli.tool import serve, wants_help
    from zoo.config.errors import ZooError

    saved = list(sys.argv)
    words = in_one_group(argv)[1:]  # Hydra's parser takes the overrides as one group
    args = parse_hydra_args(words)
    helping = wants_help(words)  # zoo's help, from the schemas; Hydra's own is --hydra-help
    try:
        refuse_flags(words, args)
        if helping:
            check_command_line(args)  # a config naming code is refused before any help is shown
    except ZooError as exc:
        _fail(str(exc))
    if helping:
        from zoo.cli.config_help import train_help

        serve("zoo-train", print, lambda: train_help(words, __doc__))
        return
    register_configs()
    inherited = RUN_TIME_ENV in os.environ
    if inherited:
        try:
            datetime.fromisoformat(os.environ[RUN_TIME_ENV])
        except ValueError:
            _fail(
                f"{RUN_TIME_ENV}={os.environ[RUN_TIME_ENV]!r} is not a start time (ISO format, e.g. "
                f"2026-11-26T10:00:00); zoo-train sets it for the processes of one run: unset it"
            )
    agree_run_time()  # one start time, hence one run directory, for every rank of this run
    # a start time shared with other processes (a launcher's ranks, torchrun's store, a SLURM
    # step, a requeued job) names a directory they share: never renamed
    shared = inherited or "TORCHELASTIC_RUN_ID" in os.environ or int(os.environ.get("SLURM_NTASKS", "1") or 1) > 1
    started = time.time()
    claim, sweep_dir, chosen = None, None, []
    try:
        checked = check_command_line(args)
        if checked is not None and launch_rank() == 0:  # the other ranks claim in their job
            if checked.multirun:
                sweep_dir = claim_sweep(checked, shared)
                chosen = [dir_override("sweep", sweep_dir)] if sweep_dir is not None else []
                chosen.append(subdir_override(checked.cfg))  # each job's directory checked where it is made
            else:
                with command.holding():  # a stop during the claim is answered once it is claimed
                    claim = claim_single(checked, shared)
                    if claim is not None:  # a stop from here writes its failed.json (a finished run's: none)
                        resume = _claimed_resume_command(args, claim.run_dir)
                        command.claimed(claim.run_dir, resume, finished=claim.finished is not None)
                chosen = [dir_override("run", claim.run_dir)] if claim is not None else []
                if claim is not None and claim.finished is not None:  # its record of the command stays
                    chosen.append("hydra.output_subdir=null")
        if checked and not checked.multirun and runs_as_claimed(checked.cfg) and (claim or launch_rank()):
            _run_hydra(_run_claimed(claim, checked.cfg, args), None, started - 1)
        else:  # a sweep, init_from=hf:DIR: hydra.main reads its command line
            # the directory zoo chose, on Hydra's command line (and its ranks')
            sys.argv[:] = with_overrides([argv[0], *words], args, chosen)
            _run_hydra(_hydra_app(claim), sweep_dir, started - 1)
        _sweep_summary(sweep_dir, started - 1)
    except ZooError as exc:  # a refusal of the claim, or one the steps above did not report themselves
        _fail(str(exc))
    finally:
        sys.argv[:] = saved
        if claim is not None:
            claim.give_back()
        if not inherited:  # a later run in this process gets a time of its own
            os.environ.pop(RUN_TIME_ENV, None)


if __name__ == "__main__":
    main()
