"""What a zoo checkpoint holds besides its model, task, optimizer and schedule sections
(`CheckpointExtras`, the task's `extra` hyperparameter): the tokenizer's kind and special ids,
the run's data section and, for classification, the label names. Written and read with the
other sections by `zoo.config.records.hparams` (`to_hparams`, `from_hparams`); checkpoints are
data, so it is stored as a plain dict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CheckpointExtras:
    tokenizer_kind: str = "byte"  # the kind the data was encoded with (`tokenizer.kind`)
    special_ids: dict[str, int | None] = field(default_factory=dict)  # pad, unk, bos, eos, mask, cls
    data: dict[str, Any] | None = None  # the run's data section: zoo-eval's default dataset
    labels: list[str] | None = None  # classification: the label names, in class order
    unknown: dict[str, Any] = field(default_factory=dict)  # keys of another zoo version, kept

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"special_ids": dict(self.special_ids), "tokenizer_kind": self.tokenizer_kind}
        if self.data is not None:
            out["data"] = dict(self.data)
        if self.labels is not None:
            out["labels"] = list(self.labels)
        return {**out, **{k: v for k, v in self.unknown.items() if k not in out}}

    @classmethod
    def read(cls, extra: dict[str, Any] | None) -> CheckpointExtras:
        """The extras of a checkpoint's `hyper_parameters["extra"]` (None or {}: a checkpoint
        written without them, whose tokenizer was bytes)."""
        extra = dict(extra or {})
        known = {"tokenizer_kind", "special_ids", "data", "labels"}
        return cls(
            tokenizer_kind=str(extra.get("tokenizer_kind", "byte")),
            special_ids=dict(extra.get("special_ids") or {}),
            data=dict(extra["data"]) if extra.get("data") is not None else None,
            labels=list(extra["labels"]) if extra.get("labels") is not None else None,
            unknown={k: v for k, v in extra.items() if k not in known},
        )
