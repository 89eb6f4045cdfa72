"""Building the systems of a comparison by name, from the workload's zoo model (peers get the
same weights where a converter exists)."""

from __future__ import annotations

import torch

from zoo.bench.peers import PEERS
from zoo.bench.workload import Subject, Workload
from zoo.bench.zoo_subject import ZooSubject
from zoo.config.schema.model import ModelConfig

SYSTEMS = ("zoo", *PEERS)


def build_subject(
    system: str, work: Workload, *, compile: bool = False, name: str | None = None, zoo: Subject | None = None
) -> Subject:
    """`system`: "zoo" or a peer name. Peers start from the weights of `zoo` (a ZooSubject;
    built here when not given) so every system computes the same function."""
    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; choose from {', '.join(SYSTEMS)}")
    if system == "zoo":
        return ZooSubject(work, compile=compile, name=name or "zoo")
    if zoo is None:
        torch.manual_seed(0)
        zoo = ZooSubject(work)
    subject = PEERS[system](work, zoo_model=zoo.model, compile=compile)
    if name:
        subject.name = name
    return subject


def workload_from_spec(spec: dict) -> Workload:
    """A Workload from plain data (the memory measurement's subprocess reads it as JSON)."""
    return Workload(
        model=ModelConfig(**spec["model"]),
        batch=spec["batch"],
        seq_len=spec["seq_len"],
        device=torch.device(spec.get("device", "cpu")),
        bf16=spec.get("bf16", False),
    )
