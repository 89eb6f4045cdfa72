"""Checkpoints are data: `load_checkpoint` rebuilds the task, its model and its tokenizer from
the file alone, reading it with `torch.load(weights_only=True)` so nothing in the file can run
code.

A checkpoint is one file, or, written by `trainer=fsdp`, a directory of shards (one file per
rank, `.metadata` indexing them, `meta.pt` with everything but weights and optimizer). Both
read alike: `read_checkpoint` gathers a directory's shards into one state dict on one process.
The shard index is read by `zoo.training.checkpoint.shard_index` (an exact list of names, what
it says of its shards checked); non-tensor values in the shards load with weights_only=True.

Before the model is built, its config is held against the weights it holds
(`check_config_fits_weights`): the model a checkpoint rebuilds is sized by its
`hyper_parameters` alone, so a config that names far more parameters than the file holds
(model.d_model=2^20 beside a small model's weights) would allocate terabytes, or fail deep
inside torch, before the weights are ever compared; the parameters a config describes are
counted without torch (`zoo.config.schema.params.parameter_parts`, a lower bound of the whole
model)."""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import torch

from zoo.config.errors import CheckpointError, ConfigError, ZooError  # noqa: F401  (CheckpointError re-exported)
from zoo.config.records.hparams import from_hparams
from zoo.config.records.rundir import SHARDED_META, locate_checkpoint  # noqa: F401  (SHARDED_META re-exported)
from zoo.config.schema.model import ModelConfig
from zoo.config.schema.params import largest_part, parameter_parts
from zoo.config.schema.rope_rule import with_rope_rule
from zoo.data.tokenizers.state import TokenizerStateError, tokenizer_from_state
from zoo.tasks import TASKS
from zoo.training.checkpoint.integrity import check_checkpoint, require_record
from zoo.training.checkpoint.shard_index import SHARD_INDEX, ShardIndexError, safe_shard_reader  # noqa: F401


def is_sharded_checkpoint(path: str | Path) -> bool:
    path = Path(path)
    return path.is_dir() and (path / SHARDED_META).is_file()


def _safe_planner(keys: list[str]):
    """Rebuilds the saved state dict (only `keys`) on one process; non-tensor values are read
    with weights_only=True (torch's planner unpickles them freely)."""
    from torch.distributed.checkpoint._traverse import set_element
    from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner

    class _Planner(_EmptyStateDictLoadPlanner):
        def load_bytes(self, read_item, value: io.BytesIO) -> None:
            obj = torch.load(value, map_location="cpu", weights_only=True)
            if self.flatten_state_dict:
                set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
            else:
                self.state_dict[read_item.dest_index.fqn] = obj

    return _Planner(keys=keys)


def gather_shards(path: str | Path, keys: tuple[str, ...] = ("state_dict",)) -> dict[str, Any]:
    """The full tensors of a sharded checkpoint's `keys`, on this one process (CPU)."""
    import warnings

    # the loader torch's own dcp_to_torch_save uses: it fills the given dict from the index
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    state: dict[str, Any] = {}
    with warnings.catch_warnings():  # "assuming the intent is to load in a single process": it is
        warnings.filterwarnings("ignore", message=".*load in a single process.*")
        _load_state_dict(state, storage_reader=safe_shard_reader(path), planner=_safe_planner(list(keys)), no_dist=True)
    return state


def _read_sharded(path: Path, weights: bool) -> dict[str, Any]:
    if not (path / SHARD_INDEX).is_file():
        raise CheckpointError(f"checkpoint {path} is an unfinished sharded checkpoint (no {SHARD_INDEX})")
    from torch.distributed.checkpoint.api import CheckpointException

    try:
        data = torch.load(path / SHARDED_META, map_location="cpu", weights_only=True)
        safe_shard_reader(path).read_metadata()  # the index first: torch's loader logs its failures loudly
        if weights:
            data.update(gather_shards(path))
    except CheckpointException as exc:  # torch's loader wraps each rank's failure (a BaseException)
        causes = [f for f in getattr(exc, "failures", {}).values()]
        cause = causes[0] if causes else exc
        cause = cause[0] if isinstance(cause, tuple) else cause  # (exception, its traceback summary)
        kind = (
            "holds more than plain data and is refused"
            if isinstance(cause, pickle.UnpicklingError)
            else "is truncated or not a checkpoint"
        )
        first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        raise CheckpointError(f"checkpoint {path} {kind} ({first})") from None
    except ShardIndexError as exc:
        raise CheckpointError(f"checkpoint {path} is refused: {str(exc).strip().splitlines()[0]}") from None
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unpickling failed"
        raise CheckpointError(f"checkpoint {path} holds more than plain data and is refused ({first})") from None
    except (RuntimeError, EOFError, OSError, ValueError, KeyError) as exc:
        raise CheckpointError(
            f"checkpoint {path} is truncated or not a checkpoint ({exc.__class__.__name__})"
        ) from None
    if not isinstance(data, dict) or "hyper_parameters" not in data:
        raise CheckpointError(f"{path} is not a zoo checkpoint (no hyper_parameters)")
    return data


def checkpoint_in(path: Path) -> Path:
    """`path`, or for a run directory (or its checkpoints/ directory) its checkpoint: the
    torch-free `zoo.config.records.rundir.locate_checkpoint`."""
    return locate_checkpoint(path)


def read_checkpoint(path: str | Path, *, weights: bool = True) -> dict[str, Any]:
    """A checkpoint file or sharded directory as plain data. weights=False reads a sharded
    checkpoint's meta.pt only (step, loops, callbacks, hyperparameters, and the weights' average
    of optim.ema, which is kept whole there), not its shards."""
    path = checkpoint_in(Path(path))  # exists, and a file is one torch.save wrote
    unchecked = check_checkpoint(path)  # whole: every zip member's CRC-32, a sharded directory's recorded digests
    if is_sharded_checkpoint(path):
        data = _read_sharded(path, weights)
        require_record(path, data, unchecked)  # what it was written with is there to check
        return data
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unpickling failed"
        raise CheckpointError(f"checkpoint {path} holds more than plain data and is refused ({first})") from None
    except (RuntimeError, EOFError, OSError, ValueError) as exc:
        raise CheckpointError(
            f"checkpoint {path} is truncated or not a checkpoint ({exc.__class__.__name__})"
        ) from None
    if not isinstance(data, dict) or "hyper_parameters" not in data or "state_dict" not in data:
        raise CheckpointError(f"{path} is not a zoo checkpoint (no hyper_parameters / state_dict)")
    require_record(path, data, unchecked)
    return data


def load_checkpoint(
    path: str | Path, map_location: str | torch.device = "cpu", rope_rule: list[str] | None = None, tool: str = "zoo"
):
    """Rebuild the LightningModule saved at `path` (any zoo task), in eval mode, with its
    tokenizer attached as `.tokenizer` when the checkpoint carries one. `rope_rule`:
    `model.position.*` overrides of RoPE's context-extension rule to run it with
    (`zoo.config.schema.rope_rule.with_rope_rule`; `tool` names the program in a refusal)."""

    data = read_checkpoint(path)
    hparams = data["hyper_parameters"]
    missing = [k for k in ("model", "task") if not isinstance(hparams, dict) or not isinstance(hparams.get(k), dict)]
    if missing:
        raise CheckpointError(
            f"checkpoint {path} is not a zoo checkpoint: its hyper_parameters lack {' and '.join(missing)}"
        )
    if rope_rule:
        hparams = {**hparams, "model": with_rope_rule(hparams["model"], rope_rule, tool)}
    try:
        trained = from_hparams(hparams)
        check_config_fits_weights(path, trained.model, data["state_dict"])  # before anything is allocated
        task = TASKS[trained.task.kind](**hparams)
    except CheckpointError:
        raise
    except (ConfigError, TypeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path} holds a config zoo cannot build: {exc}") from None
    try:
        task.load_state_dict(task.upgrade_state_dict(data["state_dict"]))
    except (RuntimeError, KeyError) as exc:
        lines = [" ".join(line.split()) for line in str(exc).splitlines() if line.strip()]
        detail = next(
            (line for line in lines if "mismatch" in line or "key" in line.lower()),
            lines[0] if lines else type(exc).__name__,
        )
        raise CheckpointError(f"checkpoint {path}: its weights do not fit its own config ({detail[:300]})") from None
    if "zoo_tokenizer" in data:
        try:
            task.tokenizer = tokenizer_from_state(data["zoo_tokenizer"])
        except TokenizerStateError as exc:
            raise CheckpointError(f"checkpoint {path}: {exc}") from None
    return task.to(map_location).eval()


# slack for what an older checkpoint lacks and `upgrade_state_dict` adds (a few norms or biases)
_SLACK = 2**20


def held_numbers(state_dict: Any) -> int:
    """The numbers held by the tensors of a state dict."""
    if not isinstance(state_dict, dict):
        return 0
    return sum(t.numel() for t in state_dict.values() if isinstance(t, torch.Tensor))


def check_config_fits_weights(path: str | Path, model: ModelConfig, state_dict: Any) -> None:
    """Refuse, on one line naming the key that makes it large, a checkpoint whose model config
    describes more parameters than its weights hold."""
    parts = parameter_parts(model)
    described, held = sum(parts.values()), held_numbers(state_dict)
    if described <= 2 * held + _SLACK:
        return
    key, most = largest_part(model, parts)
    raise CheckpointError(
        f"checkpoint {path}: its config describes a model of {described:,} parameters (most from "
        f"{key}: {most:,}) but it holds {held:,} weights; its config is not its weights' "
        f"(the model is not built)"
    )
