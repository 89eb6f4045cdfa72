"""What this machine must have for a run; `zoo.config.schema.validate` checks the config alone."""

from __future__ import annotations

from zoo.config.errors import ConfigError
from zoo.config.facts.optimizers import OPTIMIZER_FACTS, OptimizerKind
from zoo.config.schema.batching import per_device_batch
from zoo.config.schema.logger import WandbMode
from zoo.config.schema.params import STACK, largest_part, parameter_parts
from zoo.config.schema.root import ZooConfig
from zoo.config.schema.task import OutputLoss
from zoo.config.schema.trainer import is_sharded_name
from zoo.training.tracking.settings import mlflow_uri, wandb_key_set, wandb_online


def check_machine(spec: ZooConfig) -> None:
    """What this machine must have for the run (`zoo.config.schema.validate` checks the config alone):
    a GPU when the trainer asks for one, the packages of the options chosen."""
    import importlib.util

    accelerator = str(spec.trainer.get("accelerator", "auto"))
    if accelerator == "cpu":  # before torch loads: answered in about a second
        check_host_memory(spec)
        warn_long_attention(spec)

    import torch

    if spec.logger.tensorboard and not any(importlib.util.find_spec(m) for m in ("tensorboard", "tensorboardX")):
        raise ConfigError("logger.tensorboard=true needs tensorboard: pip install tensorboard")
    for tracker in spec.logger.trackers:
        if importlib.util.find_spec(tracker) is None:
            raise ConfigError(
                f"logger={tracker} needs {tracker}, which is not installed: pip install '.[{tracker}]' "
                f"in zoo's source directory (or pip install {tracker})"
            )
    if spec.logger.mlflow.enabled:
        check_tracking_server(mlflow_uri(spec.logger.mlflow))
    if spec.logger.wandb.enabled and wandb_online(spec.logger.wandb) and not wandb_key_set():
        how = "logger.wandb.mode=online" if spec.logger.wandb.mode == WandbMode.online else "WANDB_MODE=online"
        raise ConfigError(
            f"{how} needs a W&B API key (WANDB_API_KEY, or `wandb login`); "
            f"logger.wandb.mode=offline keeps the run in the run directory for `wandb sync`"
        )

    if accelerator == "auto" and not torch.cuda.is_available():
        check_host_memory(spec)
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"trainer.accelerator={accelerator} asks for a GPU and this machine has none "
            f"(torch sees no CUDA device); add trainer=cpu (or trainer=ddp_cpu) to run it "
            f"on the CPU"
        )
    if spec.task.output_loss == OutputLoss.liger:
        if accelerator in ("cpu", "mps") or not torch.cuda.is_available():
            raise ConfigError(
                "task.output_loss=liger runs Triton kernels on a CUDA GPU, and this run has "
                "none; use task.output_loss=auto"
            )
        if importlib.util.find_spec("liger_kernel") is None:
            raise ConfigError(
                "task.output_loss=liger needs liger-kernel (pip install '.[liger]' in zoo's source directory)"
            )


ATTENTION_WARN_PAIRS = 2**29  # about a second of a CPU core's work per layer, forward alone


def warn_long_attention(spec: ZooConfig) -> None:
    """One line on stderr, before anything starts, when one layer's attention on the CPU scores
    more than ATTENTION_WARN_PAIRS pairs of positions a micro-batch (batch x heads x seq_len^2):
    each step then takes minutes, and a signal is answered between operations only
    (callbacks.stop_grace_s)."""
    import sys

    devices = spec.trainer.get("devices", 1)
    world = devices if isinstance(devices, int) and devices > 0 else 1
    try:
        batch, _ = per_device_batch(spec.data.global_batch_size, world, spec.data.max_device_batch_size)
    except ConfigError:
        return
    seq_len = spec.data.seq_len
    pairs = batch * spec.model.n_heads * seq_len * seq_len
    if pairs > ATTENTION_WARN_PAIRS:
        print(
            f"zoo: warning: one layer's attention scores {pairs:,} pairs of positions a micro-batch on the CPU "
            f"({batch} x {spec.model.n_heads} heads x data.seq_len {seq_len} squared): a step will take minutes "
            f"and stops for a signal only between operations; lower data.seq_len or data.max_device_batch_size",
            file=sys.stderr,
            flush=True,
        )


def check_tracking_server(uri: str, timeout: float = 10.0) -> None:
    """An MLflow server (http:// or https://) must answer its /health before the run starts:
    MLflow's client would otherwise retry for minutes at the first metric."""
    import urllib.error
    import urllib.request

    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        raise ConfigError(
            f"the MLflow tracking server at {uri} answered /health with HTTP {exc.code}; "
            f"is logger.mlflow.tracking_uri an MLflow server?"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(
            f"cannot reach the MLflow tracking server at {uri} ({reason}); start it "
            f"(mlflow server --host HOST --port PORT) or set logger.mlflow.tracking_uri"
        ) from None


# float32 weights and their gradients: 2 numbers of 4 bytes a parameter, plus the optimizer's
# state (its row in zoo.config.facts.optimizers: AdamW's two moments, Muon's one buffer)
BYTES_PER_NUMBER = 4


def bytes_per_parameter(kind: OptimizerKind = OptimizerKind.adamw, hidden: bool = False) -> int:
    """Bytes a float32 parameter costs in training under optimizer `kind`: itself, its gradient
    and its optimizer state (`hidden`: one of the stack's matrices, which Muon takes)."""
    return BYTES_PER_NUMBER * (2 + OPTIMIZER_FACTS[kind].state_per_parameter(hidden))


def check_host_memory(spec: ZooConfig) -> None:
    """A model whose weights, gradients and optimizer state alone exceed this machine's memory
    (per process, times the processes a CPU run starts unless they shard) is refused before
    anything is built, naming the key that makes it that large."""
    devices = spec.trainer.get("devices", 1)
    processes = devices if isinstance(devices, int) and devices > 0 else 1
    if is_sharded_name(spec.trainer.get("strategy")):
        # the shards of one copy; hsdp keeps trainer.replicate copies over trainer.num_nodes machines
        replicas, nodes = spec.trainer.get("replicate") or 1, spec.trainer.get("num_nodes", 1) or 1
        processes = max(1, replicas // nodes) if isinstance(replicas, int) and isinstance(nodes, int) else 1
    check_model_memory(spec.model, processes, spec.optim.kind, init_from=spec.init_from)


def check_model_memory(
    model, processes: int = 1, optimizer: OptimizerKind = OptimizerKind.adamw, *, init_from: str | None = None
) -> None:
    """A model (a ModelConfig) whose float32 weights, gradients and optimizer state (`optimizer`'s
    row), in each of `processes` processes, exceed this machine's memory is refused before it is
    built, on one line naming the key that makes it that large (zoo-train; zoo-bench, which
    trains it too), or, under `init_from` (whose directory fixes every model key), what the
    command can change instead."""
    import os

    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX machine: nothing to compare with
        return
    parts = parameter_parts(model)
    params = sum(parts.values())
    need = processes * sum(n * bytes_per_parameter(optimizer, part == STACK) for part, n in parts.items())
    if need <= total:
        return
    key, most = largest_part(model, parts)
    each = f" in each of {processes} processes" if processes > 1 else ""
    raise ConfigError(
        f"the model has {params:,} parameters: {need / 2**30:,.1f} GiB for float32 weights, gradients "
        f"and {optimizer.value}'s state{each}, more than this machine's {total / 2**30:,.1f} GiB; most come from "
        f"{key}: {most:,}; {_smaller(init_from)}"
    )


def _smaller(init_from: str | None) -> str:
    """How to ask for a smaller model: its keys, or, when init_from's directory fixes them, the
    directory."""
    if init_from is None:
        return "lower it"
    return f"init_from={init_from} fixes the architecture: give the directory of a smaller model, or drop init_from"
