"""What this machine must have for a run; `zoo.config.validate` checks the config alone."""

from __future__ import annotations

from zoo.config.errors import ConfigError
from zoo.config.root import ZooConfig
from zoo.config.train import OutputLoss


def check_machine(spec: ZooConfig) -> None:
    """What this machine must have for the run (`zoo.config.validate` checks the config alone):
    a GPU when the trainer asks for one, the packages of the options chosen."""
    import importlib.util

    import torch

    if spec.logger.tensorboard and not any(importlib.util.find_spec(m) for m in ("tensorboard", "tensorboardX")):
        raise ConfigError("logger.tensorboard=true needs tensorboard: pip install tensorboard")

    accelerator = str(spec.trainer.get("accelerator", "auto"))
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(f"trainer.accelerator={accelerator} asks for a GPU and this machine has none "
                          f"(torch sees no CUDA device); add trainer=cpu (or trainer=ddp_cpu) to run it "
                          f"on the CPU")
    if spec.task.output_loss == OutputLoss.liger:
        if accelerator in ("cpu", "mps") or not torch.cuda.is_available():
            raise ConfigError("task.output_loss=liger runs Triton kernels on a CUDA GPU, and this run has "
                              "none; use task.output_loss=auto")
        if importlib.util.find_spec("liger_kernel") is None:
            raise ConfigError("task.output_loss=liger needs liger-kernel (pip install '.[liger]' in zoo's "
                              "source directory)")
