"""`zoo-train`: compose conf/ with command-line overrides and train.

    zoo-train                                   # the embedded default
    zoo-train model=llama model/position=alibi trainer.max_steps=100
    zoo-train -m model/position=rope,alibi seed=0,1   # a sweep

Every key and its default: `zoo-train --help`; a recipe: `zoo-train -cn NAME`.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from zoo.cli.hydra_args import HydraArgs, config_source_of, parse_hydra_args, sweep_variants, unknown_words
from zoo.cli.launch import (
    DEFAULT_DIRS,
    RUN_TIME_ENV,
    SUBMITIT_FOLDER_ENV,
    agree_run_time,
    launch_rank,
    register_resolvers,
)
from zoo.cli.objective import objective
from zoo.config.paths import CONFIG_NAME, config_source
from zoo.config.records.rundir import RunDir
from zoo.config.schema.store import register_configs

FULL_ERROR_ENV = "HYDRA_FULL_ERROR"

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
    import shlex

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
    if HydraConfig.get().mode == RunMode.MULTIRUN:
        print(f"zoo-train: error: {run_dir}: {message}", file=sys.stderr)
        raise ArmFailed(message) from None


def _hydra_app(claim):
    """zoo-train's Hydra application: Hydra composes, writes .hydra/ and runs each job; a job
    runs `claim` (the single run main() claimed before Hydra started) or, for a job of a
    sweep and a rank a launcher started, claims its own. A job that fails has written its
    failed.json and said so on one line; a sweep goes on, and main() ends it with one line."""

    @hydra.main(config_path=config_source(), config_name=CONFIG_NAME, version_base="1.3")
    def zoo_train(cfg: DictConfig) -> float | None:
        try:
            return _train_job(cfg, claim)
        except ArmFailed:
            return None

    return zoo_train


def _train_job(cfg: DictConfig, claim) -> float | None:
    from zoo.cli.compose import with_init_from
    from zoo.run.lifecycle import execute, refused
    from zoo.run.outcome import Outcome
    from zoo.run.preflight import RunRefused, claim_run

    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    try:
        if claim is None:  # Hydra's composition, finished as zoo.compose finishes its own
            cfg = with_init_from(cfg, list(hydra_cfg.overrides.task))
            # a job of a sweep takes its own directory's lock; a rank shares its run's
            claim = claim_run(cfg, run_dir, lock=hydra_cfg.mode == RunMode.MULTIRUN, record_refusals=True)
        outcome = execute(claim, resume_command=lambda: _resume_command(run_dir), on_stuck=_say_interrupted)
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
    summary = outcome.summary
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
    return objective(run_dir)  # the Optuna sweeper's score: read from the record zoo-compare reads


@dataclass(frozen=True)
class Checked:
    """A command line that composes: the composition of its run (a sweep: of one of its jobs,
    with the `hydra:` section), and whether it is a sweep."""

    cfg: DictConfig
    multirun: bool


def _check_overrides(args: HydraArgs) -> Checked | None:
    """Compose before Hydra does, so that a bad key, value or combination is reported on one
    line (Hydra's own report spans several), and so that no config, whatever its origin, gets
    Hydra to build an object outside zoo's allow-list (a launcher, sweeper, callback or logging
    handler named `os.system`). A sweep, from the command line or `hydra.sweeper.params`, is
    checked once per value of each swept key. None for a command that runs nothing."""
    if args.shell_completion or args.info:  # Hydra composes these itself: its files are checked first
        from zoo.cli.compose import check_config_files
        from zoo.config.errors import ConfigError

        try:
            check_config_files(
                list(args.overrides),
                args.config_name or CONFIG_NAME,
                config_source_dir=config_source_of(args),
                config_dirs=[args.config_dir] if args.config_dir else [],
            )
        except ConfigError as exc:
            _fail(str(exc))
    if args.shell_completion or args.info or args.version or args.unreadable:
        return None
    if args.experimental_rerun:
        _fail("--experimental-rerun is refused: it unpickles a file, and pickles can run code")
    from omegaconf import OmegaConf

    from zoo.cli.compose import check_model, compose
    from zoo.config.errors import ConfigError

    source = config_source_of(args)
    name = args.config_name or CONFIG_NAME
    dirs = [args.config_dir] if args.config_dir else []
    help_only = args.help or args.hydra_help

    def composed(overrides: list[str], check: bool) -> DictConfig:
        return compose(
            overrides,
            config_name=name,
            config_source_dir=source,
            config_dirs=dirs,
            return_hydra_config=True,
            check=check,
            command_line=args.overrides,
        )

    try:
        first = sweep_variants(args.overrides)[0]  # the command line itself, when it sweeps nothing
        cfg = composed(first, check=False)
        multirun = args.multirun or str(OmegaConf.select(cfg, "hydra.mode", default="")) == "RunMode.MULTIRUN"
        params = OmegaConf.select(cfg, "hydra.sweeper.params", default=None)
        params = OmegaConf.to_container(params, resolve=False) if params is not None else {}
        swept = [f"{key}={value}" for key, value in params.items()]
        for variant in sweep_variants(swept + list(args.overrides)):  # each value of each swept key
            job = cfg if variant == first else composed(variant, check=False)
            if multirun and not help_only and "launcher" in job.hydra:
                _resolve_launcher(job)
        if not multirun:  # one run: exactly the composition Hydra will make
            if first != list(args.overrides):
                cfg = composed(args.overrides, check=False)
            if not (args.cfg or help_only):
                check_model(cfg)
    except ConfigError as exc:
        _fail(str(exc))
    if args.cfg or help_only:
        return None
    return Checked(cfg, multirun)


def _configured_run_dir(cfg, mode: str = "run") -> tuple[Path, bool] | None:
    """(the run (or sweep) directory the config names, whether it is given explicitly). zoo's
    default (`DEFAULT_DIRS`, runs/DATE/TIME) is the only one renamed when taken; any other
    value, even one that reads the same, is the user's and is used as it is."""

    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        configured = OmegaConf.select(cfg, f"hydra.{mode}.dir")
        written = OmegaConf.to_container(cfg.hydra, resolve=False)[mode]["dir"]
    except (OmegaConfBaseException, ValueError, KeyError, TypeError):
        return None
    if not configured:
        return None
    overridden = any(o.startswith(f"hydra.{mode}.dir=") for o in cfg.hydra.overrides.hydra)
    return Path(configured), overridden or written != DEFAULT_DIRS[mode]


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


def _claim_single(checked: Checked, shared: bool):
    """The single run's claim, made once before Hydra writes into its directory (`zoo.run.preflight`):
    refused on one line with nothing written for a config, data, machine or directory mistake.
    The default runs/DATE/TIME taken by a run started in the same second becomes
    runs/DATE/TIME-N; `ckpt_path=last` without a directory finds the run it continues. main()
    gives Hydra the claim's directory (hydra.run.dir), and Lightning gives it to the ranks it
    starts."""
    from omegaconf import open_dict

    from zoo.run.preflight import check, claim_run, latest_run

    where = _configured_run_dir(checked.cfg)
    if where is None:
        return None
    run_dir, explicit = where
    cfg = checked.cfg.copy()
    with open_dict(cfg):
        del cfg["hydra"]
    spec = check(cfg)  # before torch and Lightning load: a refusal answers in under a second
    fresh = not explicit and not shared
    if fresh and spec.ckpt_path == "last":
        run_dir, fresh = latest_run(spec, run_dir.parent.parent), False
        print(f"zoo-train: ckpt_path=last resumes {run_dir}", file=sys.stderr)
    return claim_run(cfg, run_dir, lock=True, rename_if_taken=fresh, spec=spec)


def _claim_sweep(checked: Checked, shared: bool) -> Path | None:
    """The sweep's directory: two sweeps started in the same second get one each (each job
    locks its own directory when it runs). A sweep run again in its directory is refused when
    a link there leads out of it: Hydra writes each job's `.hydra/` before the job starts."""
    from zoo.config.records.links import check_tree
    from zoo.run.lock import claim_default

    where = _configured_run_dir(checked.cfg, "sweep")
    if where is None:
        return None
    sweep_dir, explicit = where
    if not explicit and not shared:
        try:
            sweep_dir = claim_default(sweep_dir)
        except OSError as exc:
            _fail(f"sweep directory {sweep_dir}: {exc.strerror or exc}")
    check_tree(sweep_dir)
    return sweep_dir


def _dir_override(mode: str, path: Path) -> str:
    """`hydra.MODE.dir=PATH` as an override Hydra reads back as PATH (quoted: a comma would make a
    sweep of it, `${` an interpolation)."""
    text = str(path).replace("'", "\\'").replace("${", "\\${")
    return f"hydra.{mode}.dir='{text}'"


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


def _refuse_flags(argv: list[str], args: HydraArgs) -> None:
    """An argparse-style flag (`--max_steps=10`) is refused on one line naming the override it
    stands for, before anything loads or is written (Hydra would ignore it, make the run
    directory, then print its usage screen)."""
    from zoo.cli.spelling import flag_refusal, flag_words, leaf_keys

    flags = flag_words(argv, unknown_words(argv))
    if not flags:
        return
    from zoo.cli.compose import compose
    from zoo.config.errors import ConfigError

    try:
        keys = leaf_keys(
            compose(
                [],
                config_name=args.config_name or CONFIG_NAME,
                config_source_dir=config_source_of(args),
                config_dirs=[args.config_dir] if args.config_dir else [],
                check=False,
            )
        )
    except ConfigError:
        keys = []
    _fail(flag_refusal("zoo-train", flags, keys))


def _run_hydra(claim, sweep_dir: Path | None, since: float) -> None:
    """Hydra's application, with Hydra's own error report off (HYDRA_FULL_ERROR: what a sweeper
    raises reaches main(), e.g. Optuna's when no trial finished): a sweep that stops ends on one
    line and the line naming its failed arms; a bug in a single run shows its traceback."""
    from hydra.errors import HydraException

    from zoo.config.errors import ZooError, explain

    before = os.environ.get(FULL_ERROR_ENV)
    os.environ[FULL_ERROR_ENV] = "1"
    try:
        _hydra_app(claim)()
    except (ZooError, KeyboardInterrupt):
        raise
    except HydraException as exc:
        _fail(explain(exc))
    except Exception as exc:
        if sweep_dir is None:
            raise
        print(f"zoo-train: error: the sweep stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
        _sweep_summary(sweep_dir, since)  # the failed arms named last
        sys.exit(1)
    finally:
        if before is None:
            os.environ.pop(FULL_ERROR_ENV, None)
        else:
            os.environ[FULL_ERROR_ENV] = before


def main() -> None:
    from zoo.cli.tool import serve, wants_help
    from zoo.config.errors import ZooError

    args = parse_hydra_args(sys.argv[1:])
    _refuse_flags(sys.argv[1:], args)
    if wants_help(sys.argv[1:]):  # zoo's help, from the schemas; Hydra's own is --hydra-help
        from zoo.cli.config_help import train_help

        _check_overrides(args)  # a config naming code is refused before any help is shown
        serve("zoo-train", print, lambda: train_help(sys.argv[1:], __doc__))
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
    claim, sweep_dir, chosen, argv = None, None, [], list(sys.argv)
    try:
        checked = _check_overrides(args)
        if checked is not None and launch_rank() == 0:  # the other ranks claim in their job
            if checked.multirun:
                sweep_dir = _claim_sweep(checked, shared)
                chosen = [_dir_override("sweep", sweep_dir)] if sweep_dir is not None else []
            else:
                claim = _claim_single(checked, shared)
                chosen = [_dir_override("run", claim.run_dir)] if claim is not None else []
        sys.argv[:] = [*argv, *chosen]  # the directory zoo chose, on Hydra's command line (and its ranks')
        _run_hydra(claim, sweep_dir, started - 1)
        _sweep_summary(sweep_dir, started - 1)
    except KeyboardInterrupt:  # before training started, or a second Ctrl-C: nothing more to save
        if launch_rank() == 0:
            print("zoo-train: interrupted", file=sys.stderr)
        sys.exit(130)
    except ZooError as exc:  # a refusal of the claim, or one the steps above did not report themselves
        _fail(str(exc))
    finally:
        sys.argv[:] = argv
        if claim is not None:
            claim.give_back()
        if not inherited:  # a later run in this process gets a time of its own
            os.environ.pop(RUN_TIME_ENV, None)


if __name__ == "__main__":
    main()
