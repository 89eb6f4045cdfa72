"""Adapters for the peer libraries (optional: `pip install '.[bench]' in zoo's source directory`). Each builds the same
model as the workload's zoo config, or says in one line why it cannot."""

from __future__ import annotations

from collections.abc import Callable

from zoo.bench.peers.gptfast import GptFastSubject
from zoo.bench.peers.hf import HFSubject
from zoo.bench.peers.litgpt import LitGPTSubject
from zoo.bench.peers.unavailable import PeerUnavailable
from zoo.bench.peers.xtransformers import XTransformersSubject
from zoo.bench.workload import Subject

# each is called as PEER(work, zoo_model=..., compile=...)
PEERS: dict[str, Callable[..., Subject]] = {
    "hf": HFSubject,
    "x-transformers": XTransformersSubject,
    "litgpt": LitGPTSubject,
    "gpt-fast": GptFastSubject,
}


__all__ = ["PEERS", "PeerUnavailable"]
