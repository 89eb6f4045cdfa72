"""A bench peer runs a workload only as the same model: every kind of every ablation axis
(`zoo.config.facts.axes.AXES`, so a kind added later is covered at once) is either mapped to
the peer's equivalent or refused with PeerUnavailable naming it, never run as another (a norm
type it does not know is not LayerNorm)."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import tiny
from tests.contract.conftest import MODEL_PAIRS, model_kwargs, pair_id
from zoo.bench.peers import gptfast, litgpt, xtransformers
from zoo.bench.peers.mapped import setting
from zoo.bench.peers.unavailable import PeerUnavailable
from zoo.bench.workload import Workload
from zoo.config import ConfigError, ModelConfig

PEERS = {
    "litgpt": (litgpt.config_kwargs, litgpt.MAPPED),
    "x-transformers": (xtransformers.decoder_kwargs, xtransformers.MAPPED),
    "gpt-fast": (lambda work: gptfast.check(work.model) or True, gptfast.MAPPED),
}
DEFAULT = ModelConfig(**tiny())


def mapped(peer: str, key: str, kind) -> bool:
    """Whether the peer lists `kind` of `key`; an axis it does not list: the default kind only."""
    return kind in PEERS[peer][1].get(key, (setting(DEFAULT, key),))


@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("ax,kind", MODEL_PAIRS, ids=pair_id)
def test_a_peer_maps_a_kind_or_refuses_it_by_name(peer, ax, kind):
    try:
        cfg = ModelConfig(**model_kwargs(ax.settings(kind)))
    except ConfigError as refused:
        pytest.skip(str(refused))
    convert = PEERS[peer][0]
    work = Workload(model=cfg, batch=2, seq_len=16, device=torch.device("cpu"))
    if mapped(peer, ax.key, kind):
        assert convert(work)
    else:
        with pytest.raises(PeerUnavailable, match=kind.value):
            convert(work)


def test_the_peers_map_rmsnorm_to_theirs_and_leave_kinds_unmapped():
    assert (
        litgpt.config_kwargs(
            Workload(model=ModelConfig(**tiny(norm_type="rmsnorm")), batch=2, seq_len=16, device=torch.device("cpu"))
        )["norm_class_name"]
        == "RMSNorm"
    )
    _, layers = xtransformers.decoder_kwargs(
        Workload(model=ModelConfig(**tiny(norm_type="rmsnorm")), batch=2, seq_len=16, device=torch.device("cpu"))
    )
    assert layers["use_rmsnorm"] is True
    unmapped = {(p, a.key, k.value) for p in PEERS for a, k in MODEL_PAIRS if not mapped(p, a.key, k)}
    assert {
        ("litgpt", "model.activation", "relu"),
        ("x-transformers", "model.activation", "relu"),
        ("litgpt", "model.norm", "post"),
    } <= unmapped  # so the refusals above are exercised
