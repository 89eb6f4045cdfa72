"""`zoo-train`: compose conf/ with command-line overrides and train.

    zoo-train                                   # the embedded default
    zoo-train model=llama model/position=alibi trainer.max_steps=100
    zoo-train -m model/position=rope,alibi seed=0,1   # a sweep
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from zoo.cli.launch import RUN_TIME_ENV, agree_run_time, register_resolvers
from zoo.config.paths import CONFIG_NAME, config_source
from zoo.config.store import register_configs

# at import, not only in main(): a SLURM job of a sweep unpickles `_train` and resolves the
# config without running main()
register_resolvers()


def _fail(message: str, status: int = 2) -> None:
    """One line on stderr; status 2 for bad input, 1 for a run that could not go on."""
    print(f"zoo-train: error: {message}", file=sys.stderr)
    sys.exit(status)


@hydra.main(config_path=config_source(), config_name=CONFIG_NAME, version_base="1.3")
def _train(cfg: DictConfig) -> float | None:
    from zoo.checkpoint import CheckpointError
    from zoo.config.errors import ConfigError
    from zoo.data.errors import DataError
    from zoo.training.run import TrainingStopped, train

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        result = train(cfg, run_dir)
        summary = result.summary
    except (ConfigError, DataError, CheckpointError) as exc:
        _fail(str(exc))
        return None
    except TrainingStopped as exc:
        _fail(str(exc), status=1)
        return None
    if not result.is_global_zero:  # one report per run, from rank 0
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


def _check_overrides(argv: list[str]) -> None:
    """Compose once before Hydra does, so a bad key, value or combination is reported on one
    line (Hydra's own report spans several). Sweeps, --cfg, --help and custom config paths are
    left to Hydra."""
    try:
        from hydra._internal.utils import get_args_parser
    except ImportError:  # pragma: no cover - private API moved
        return
    args, _ = get_args_parser().parse_known_args(argv)
    if args.multirun or args.help or args.hydra_help or args.cfg or args.info or args.shell_completion \
            or args.config_path or args.config_dir or args.experimental_rerun:
        return
    from zoo.config.compose import compose
    from zoo.config.errors import ConfigError

    try:
        compose(args.overrides, config_name=args.config_name or CONFIG_NAME)
    except ConfigError as exc:
        _fail(str(exc))


def main() -> None:
    import os

    register_configs()
    _check_overrides(sys.argv[1:])
    inherited = RUN_TIME_ENV in os.environ
    agree_run_time()  # one start time, hence one run directory, for every rank of this run
    try:
        _train()
    finally:
        if not inherited:  # a later run in this process gets a time of its own
            os.environ.pop(RUN_TIME_ENV, None)


if __name__ == "__main__":
    main()
