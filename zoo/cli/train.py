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

from zoo.config.paths import CONFIG_NAME, config_source
from zoo.config.store import register_configs


def _fail(message: str) -> None:
    print(f"zoo-train: error: {message}", file=sys.stderr)
    sys.exit(2)


@hydra.main(config_path=config_source(), config_name=CONFIG_NAME, version_base="1.3")
def _train(cfg: DictConfig) -> float | None:
    from zoo.checkpoint import CheckpointError
    from zoo.config.errors import ConfigError
    from zoo.data.errors import DataError
    from zoo.training.run import train

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        summary = train(cfg, run_dir).summary
    except (ConfigError, DataError, CheckpointError) as exc:
        _fail(str(exc))
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


def main() -> None:
    register_configs()
    _train()


if __name__ == "__main__":
    main()
