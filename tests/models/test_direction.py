"""Which tokens each family lets a position see: an encoder reads the whole input (a later
token changes an earlier position's output), a decoder only the past (it changes nothing
before it), for every position scheme."""

from __future__ import annotations

import pytest
import torch

import zoo
from tests.conftest import sharp
from zoo.config.facts.positions import PositionKind


def _changed_positions(model, family: str, ids: torch.Tensor, edited: torch.Tensor) -> torch.Tensor:
    """(T,) bool: the positions whose output differs when the input's last token is changed."""
    with torch.no_grad():
        if family == "encoder_decoder":  # the decoder's own input is edited; the source is fixed
            a = model(ids, decoder_input_ids=ids).hidden_states
            b = model(ids, decoder_input_ids=edited).hidden_states
        else:
            a, b = model(ids).hidden_states, model(edited).hidden_states
    return (a - b).abs().amax(-1)[0] > 1e-6  # (T,)


@pytest.mark.parametrize("kind", list(PositionKind))
@pytest.mark.parametrize(
    "family, sees_the_future", [("encoder_only", True), ("decoder_only", False), ("encoder_decoder", False)]
)
def test_a_later_token_reaches_earlier_positions_only_in_an_encoder(family, sees_the_future, kind):
    torch.manual_seed(0)
    model = zoo.build_model(sharp(family, kind.value)).eval()
    ids = torch.tensor([[5, 9, 2, 7, 11]])
    edited = ids.clone()
    edited[0, -1] = 20
    changed = _changed_positions(model, family, ids, edited)
    assert bool(changed[-1])
    assert bool(changed[:-1].all()) if sees_the_future else not bool(changed[:-1].any())


@pytest.mark.parametrize("kind", list(PositionKind))
def test_the_encoder_of_an_encoder_decoder_reads_the_whole_source(kind):
    torch.manual_seed(0)
    model = zoo.build_model(sharp("encoder_decoder", kind.value)).eval()
    ids = torch.tensor([[5, 9, 2, 7, 11]])
    edited = ids.clone()
    edited[0, -1] = 20
    with torch.no_grad():
        a, b = model.encode(ids), model.encode(edited)  # (1, S, D)
    assert bool(((a - b).abs().amax(-1)[0] > 1e-6).all())
