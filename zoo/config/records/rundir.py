"""The run directory: every file name in it (`RunDir`) and its summary record (`RunSummary`).

One owner for these names, so that zoo-train, which writes them, and zoo-compare, zoo-eval,
zoo-generate, zoo-export and `ckpt_path=last`, which read them, cannot drift apart:

    RUN_DIR/
        .zoo-lock                 the owner's host, pid and SLURM job while zoo-train runs
        .hydra/                   Hydra's config.yaml, hydra.yaml, overrides.yaml (rank 0)
        train.log                 rank 0's log (train.rank1.log, ... for the other ranks)
        config.yaml               the composed config, resolved
        tokenizer/                the trained tokenizer
        checkpoints/last.ckpt     every N steps and at the end: what a rerun resumes
        checkpoints/best-STEP.ckpt  the top-k by val/loss
        checkpoints/full.ckpt     a sharded (trainer=fsdp) run's whole model, for one device
        metrics.csv, hparams.yaml the CSV logger's metrics and the task's hyperparameters
        tb/                       TensorBoard's event files (logger.tensorboard=true)
        wandb/                    the W&B run's files (logger=wandb; offline: what `wandb sync` uploads)
        tracking.json             the trackers' run ids (logger=mlflow, logger=wandb): a resume goes on
                                  logging into the same tracker runs
        summary.json              when the run finishes (`RunSummary`)
        failed.json               when it stopped with an error (removed once it finishes)
        lengths.json              zoo-compare's cache of the length-extrapolation table

Torch-free (`zoo.config` is the lowest layer), so every layer above can import it. The names of
Hydra's files and of the log are chosen in conf/config.yaml (`hydra.output_subdir`,
`hydra.job_logging`); they are repeated here so that readers find them in one place."""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePath
from typing import Any, ClassVar

from zoo.config.errors import CheckpointError
from zoo.config.records.atomic import write_text
from zoo.config.records.links import inside
from zoo.config.records.reader import RUN_REMEDY, DamagedRecord, read_json_object

# config keys (prefixes) that do not change what a run learns: the seeds (init and data order)
# and bookkeeping. Runs that differ only in these are replicates of one arm (zoo-compare, the
# trackers' arm names).
BOOKKEEPING = (
    "seed",
    "data.order_seed",
    "ckpt_path",
    "callbacks.",
    "logger.",
    "tokenizer.cache_dir",
    "data.cache_dir",
    "hydra.",
)


@dataclass(frozen=True)
class RunDir:
    """The paths of one run directory. The names are class constants, for code that needs a
    name rather than a path (a glob over many run directories)."""

    path: Path

    LOCK: ClassVar[str] = ".zoo-lock"
    HYDRA: ClassVar[str] = ".hydra"
    OVERRIDES: ClassVar[str] = "overrides.yaml"  # inside .hydra/: the command line's overrides
    HYDRA_CONFIG: ClassVar[str] = "config.yaml"  # inside .hydra/: the composed config, unresolved
    LOG: ClassVar[str] = "train.log"
    RANK_LOG: ClassVar[str] = "train.rank*.log"  # the log of every rank but 0
    CONFIG: ClassVar[str] = "config.yaml"
    TOKENIZER: ClassVar[str] = "tokenizer"
    CHECKPOINTS: ClassVar[str] = "checkpoints"
    LAST: ClassVar[str] = "last.ckpt"
    FULL: ClassVar[str] = "full.ckpt"
    BEST: ClassVar[str] = "best-{step}"  # Lightning's ModelCheckpoint filename template
    BEST_FILES: ClassVar[str] = "best-*.ckpt"
    METRICS: ClassVar[str] = "metrics.csv"
    HPARAMS: ClassVar[str] = "hparams.yaml"  # written by Lightning's CSV logger beside metrics.csv
    TENSORBOARD: ClassVar[str] = "tb"
    WANDB: ClassVar[str] = "wandb"
    TRACKING: ClassVar[str] = "tracking.json"
    RANKS: ClassVar[str] = ".ranks"  # one file a rank (torchrun, srun): which process it is, while it runs
    SUMMARY: ClassVar[str] = "summary.json"
    FAILED: ClassVar[str] = "failed.json"
    LENGTHS: ClassVar[str] = "lengths.json"

    def __init__(self, path: str | PurePath) -> None:
        object.__setattr__(self, "path", Path(path))

    @property
    def lock(self) -> Path:
        return self.path / self.LOCK

    @property
    def hydra(self) -> Path:
        return self.path / self.HYDRA

    @property
    def overrides(self) -> Path:
        return self.hydra / self.OVERRIDES

    @property
    def hydra_config(self) -> Path:
        return self.hydra / self.HYDRA_CONFIG

    @property
    def log(self) -> Path:
        return self.path / self.LOG

    @property
    def config(self) -> Path:
        return self.path / self.CONFIG

    @property
    def tokenizer(self) -> Path:
        return self.path / self.TOKENIZER

    @property
    def checkpoints(self) -> Path:
        return self.path / self.CHECKPOINTS

    @property
    def last(self) -> Path:
        return self.checkpoints / self.LAST

    @property
    def full(self) -> Path:
        return self.checkpoints / self.FULL

    @property
    def metrics(self) -> Path:
        return self.path / self.METRICS

    @property
    def tensorboard(self) -> Path:
        return self.path / self.TENSORBOARD

    @property
    def wandb(self) -> Path:
        return self.path / self.WANDB

    @property
    def tracking(self) -> Path:
        return self.path / self.TRACKING

    @property
    def summary(self) -> Path:
        return self.path / self.SUMMARY

    @property
    def failed(self) -> Path:
        return self.path / self.FAILED

    @property
    def ranks(self) -> Path:
        return self.path / self.RANKS

    @property
    def lengths(self) -> Path:
        return self.path / self.LENGTHS

    def holds_run(self) -> bool:
        """Whether the directory holds a zoo run: one of the files only a run leaves
        (`RUN_MARKERS`), or the log of a rank after the first (torchrun's ranks write it before
        rank 0 claims the directory)."""
        try:
            entries = [entry.name for entry in os.scandir(self.path)]
        except OSError:
            return False
        return any(name in RUN_MARKERS or fnmatch.fnmatch(name, self.RANK_LOG) for name in entries)

    def record(self, relative: str | PurePath) -> bool:
        """Whether `relative` (a path inside the run directory) is one of the run's checkpoints or
        records (`names`), or anything in its checkpoints/ directory: what no tool's output
        replaces."""
        parts = PurePath(relative).parts
        return bool(parts) and (parts[0] == self.CHECKPOINTS or self.names(relative))

    def names(self, relative: str | PurePath) -> bool:
        """Whether `relative` (a path inside the run directory) is one this class names: one of
        its files, a best-STEP checkpoint, a rank's log, or anything inside the directories that
        another tool fills (.hydra/, tokenizer/, tb/, wandb/) or zoo's ranks (.ranks/)."""
        parts = PurePath(relative).parts
        if not parts:
            return False
        if parts[0] in (self.HYDRA, self.TOKENIZER, self.TENSORBOARD, self.WANDB, self.RANKS):
            return True
        if parts[0] == self.CHECKPOINTS and len(parts) == 2:
            return parts[1] in (self.LAST, self.FULL) or fnmatch.fnmatch(parts[1], self.BEST_FILES)
        if len(parts) == 1:
            return parts[0] in (
                self.LOCK,
                self.LOG,
                self.CONFIG,
                self.METRICS,
                self.HPARAMS,
                self.SUMMARY,
                self.FAILED,
                self.LENGTHS,
                self.TRACKING,
            ) or fnmatch.fnmatch(parts[0], self.RANK_LOG)
        return False


# what only a zoo run leaves in its directory: a directory holding one of these holds a run
RUN_MARKERS = (RunDir.LOCK, RunDir.HYDRA, RunDir.SUMMARY, RunDir.FAILED, RunDir.CHECKPOINTS, RunDir.LOG)

SHARDED_META = "meta.pt"  # Lightning's name for the non-tensor part of a sharded checkpoint directory


def locate_checkpoint(path: str | PurePath) -> Path:
    """The checkpoint `path` names, checked without torch (so a tool refuses a bad one before
    torch loads): a .ckpt file written by torch.save, a sharded checkpoint directory, a run
    directory (its checkpoints/full.ckpt, else checkpoints/last.ckpt), or a checkpoints/
    directory (its full.ckpt, else last.ckpt), not reached through a link out of the directory
    (`zoo.config.records.links`). Raises CheckpointError (LinkedOut) in one line."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint {path} does not exist")
    if path.is_dir():
        if (path / SHARDED_META).is_file():
            return path
        run = RunDir(path)
        for candidate in (run.full, run.last, path / RunDir.FULL, path / RunDir.LAST):
            if candidate.exists():  # a checkpoint of the directory, never one a link there leads to
                return locate_checkpoint(inside(candidate, path))
        raise CheckpointError(
            f"{path} is a directory without a checkpoint (neither checkpoints/{RunDir.LAST} nor "
            f"{RunDir.LAST} in it); give a .ckpt file, a run directory or its checkpoints/ "
            f"directory"
        )
    if not path.is_file():  # a pipe would block the read below; a device has no end
        raise CheckpointError(
            f"{path} is not a regular file (a pipe, device or socket); give a .ckpt file, a "
            f"run directory or its checkpoints/ directory"
        )
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic[:2] != b"PK" and magic[:1] != b"\x80":  # torch.save: a zip archive (or a legacy pickle)
        raise CheckpointError(f"{path} is not a checkpoint (not a file written by torch.save)")
    return path


def read_record(path: Path) -> dict:
    """A JSON object from `path` (`zoo.config.records.reader`); DamagedRecord naming the file
    when it is not one."""
    return read_json_object(path, remedy=RUN_REMEDY)


@dataclass(kw_only=True)
class RunSummary:
    """summary.json: what a finished run reports, in the order it is written. A key an older
    zoo did not write reads as None (`metrics` and `model` as {}); a key this version does not
    know is kept in `extra` and written back after the others."""

    OPTIONAL: ClassVar[tuple[str, ...]] = (
        "baseline",
        "sample",
        "replicas_identical",
        "replica_max_fingerprint_diff",
        "branched_from",
    )  # left out when None

    run_dir: str | None = None
    status: str | None = None  # "finished"
    task: str | None = None  # TaskKind value
    family: str | None = None  # Family value
    position: str | None = None  # PositionKind value
    global_step: int | None = None
    tokens_seen: int | None = None
    train_seconds: float | None = None  # inside the training loop (Throughput)
    tokens_per_s: float | None = None  # None when no training time was measured
    wall_seconds: float | None = None  # fit and the final validation
    metrics: dict[str, float | None] = field(default_factory=dict)  # the trainer's last scalars
    prepared_data: str | None = None  # the token shards' directory, when the data was prepared
    tokenizer: dict[str, Any] | None = None  # {"kind", "vocab_size", "digest"}: equal digests, one tokenizer
    data: dict[str, int | None] | None = (
        None  # language models: {"train_tokens", "train_bytes", "val_tokens", "val_tokens_measured"}
    )
    model: dict[str, int] = field(default_factory=dict)  # zoo.models.summary.ModelSummary.as_dict()
    # forward FLOPs per training token: the model's and those of the modules that run only in training
    # (task.mtp_depth's); a record from before zoo wrote it reads as None
    train_flops_per_token: int | None = None
    baseline: dict[str, float] | None = None  # causal_lm with counted training tokens: the unigram loss
    sample: str | None = None  # causal_lm: a greedy continuation of data.sample_prompt (or the corpus's first words)
    init_from: str | None = None  # the pretrained weights, unless resumed_from is set
    resumed_from: str | None = None  # the checkpoint this run continued
    resumed_at_step: int | None = None
    branched_from: dict[str, Any] | None = None  # branch_from: the parent's {"run", "checkpoint", "step"}
    nonfinite_skipped: int | None = None  # steps skipped for a non-finite loss
    world_size: int | None = None
    replicas_identical: bool | None = None  # data-parallel runs: do the replicas agree?
    replica_max_fingerprint_diff: float | None = None
    best_checkpoint: str | None = None
    last_checkpoint: str | None = None
    full_checkpoint: str | None = None  # sharded runs: the whole model in one file
    extra: dict[str, Any] = field(default_factory=dict)  # keys of another zoo version, kept

    def as_dict(self) -> dict[str, Any]:
        """The JSON object, keys in field order, then `extra`'s."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        for key in self.OPTIONAL:
            if out[key] is None:
                del out[key]
        return {**out, **{k: v for k, v in self.extra.items() if k not in out}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSummary:
        known = {f.name for f in fields(cls)} - {"extra"}
        values = {k: v for k, v in data.items() if k in known}
        for key in ("metrics", "model"):
            if values.get(key) is None:
                values.pop(key, None)
        return cls(**values, extra={k: v for k, v in data.items() if k not in known})

    def write(self, run_dir: str | PurePath) -> Path:
        path = RunDir(run_dir).summary
        return write_text(path, json.dumps(self.as_dict(), indent=2) + "\n")

    @classmethod
    def read(cls, run_dir: str | PurePath) -> RunSummary:
        """The run's summary.json; DamagedRecord naming the file when it is not JSON, not an
        object, or its metrics are not numbers (or null)."""
        path = RunDir(run_dir).summary
        data = read_record(path)
        metrics = data.get("metrics", {})
        if not isinstance(metrics, dict):
            raise DamagedRecord(
                f"{path} is damaged (its metrics are not a mapping); run it again or remove the run directory"
            )
        for key, value in metrics.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise DamagedRecord(
                    f"{path} is damaged (metric {key!r} is {value!r}, not a number); "
                    f"run it again or remove the run directory"
                )
        return cls.from_dict(data)


@dataclass(kw_only=True)
class RunFailure:
    """failed.json: why a run ended before it finished, written by zoo-train and by the rank that
    saw another die. A stop by a signal also holds the signal, the step of the checkpoint it
    resumes from and the command that resumes it; a key this version does not know is kept in
    `extra` and written back after the others."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("signal", "step", "resume")  # left out when None

    error: str
    status: str = "failed"
    signal: int | None = None  # the signal that stopped the run (15 SIGTERM, 2 SIGINT)
    step: int | None = None  # the step of the checkpoint the run resumes from (None: none saved)
    resume: str | None = None  # the command that resumes the run
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = {
            "status": self.status,
            "error": self.error,
            "signal": self.signal,
            "step": self.step,
            "resume": self.resume,
        }
        for key in self.OPTIONAL:
            if out[key] is None:
                del out[key]
        return {**out, **{k: v for k, v in self.extra.items() if k not in out}}

    def write(self, run_dir: str | PurePath) -> Path:
        return write_text(RunDir(run_dir).failed, json.dumps(self.as_dict(), indent=1))

    @classmethod
    def read(cls, run_dir: str | PurePath) -> RunFailure:
        """The run's failed.json; DamagedRecord naming the file when it is not JSON, not an
        object, or its fields are not of their types."""
        path = RunDir(run_dir).failed
        data = read_record(path)
        known = {f.name for f in fields(cls)} - {"extra"}
        values = {k: v for k, v in data.items() if k in known}
        values.setdefault("error", "")
        for key, kind, what in (
            ("error", str, "text"),
            ("status", str, "text"),
            ("signal", int, "an integer"),
            ("step", int, "an integer"),
            ("resume", str, "text"),
        ):
            value = values.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
                raise DamagedRecord(
                    f"{path} is damaged ({key} is {value!r}, not {what}); run it again or remove the run directory"
                )
        return cls(**values, extra={k: v for k, v in data.items() if k not in known})
