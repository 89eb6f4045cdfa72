"""The encoder of an encoder-decoder reads the whole source, for every position scheme. Which
tokens each family's own stack lets a position see (an encoder the whole input, a decoder only
the past) is checked on every row of tests/models/test_variants.py's design."""

from __future__ import annotations

import pytest
import torch

import zoo
from tests.conftest import sharp
from zoo.config.facts.positions import PositionKind


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
