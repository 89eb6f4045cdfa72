"""The residual options a row sets, and moving their mixing weights off their start: shared by
tests/nn/test_residual_options.py and tests/models/test_decoding_rows.py."""

from __future__ import annotations

import torch

from zoo.nn.hyper import HyperConnection
from zoo.nn.values import ValueStream

OPTIONS = {
    "value_residual=fixed": dict(value_residual="fixed"),
    "value_residual=learned": dict(value_residual="learned"),
    "value_embeds=1": dict(value_embeds=1),
    "hyper_connections=static": dict(hyper_connections="static", residual_streams=3),
    "hyper_connections=dynamic": dict(hyper_connections="dynamic", residual_streams=2),
    "all, parallel": dict(
        value_residual="learned", value_embeds=1, hyper_connections="dynamic", block="parallel_two_norms"
    ),
}


def perturb(model: torch.nn.Module) -> None:
    """Move every mixing weight off its start, so that no test passes at an identity."""
    g = torch.Generator().manual_seed(1)
    for module in model.modules():
        if isinstance(module, (ValueStream, HyperConnection)):
            for p in module.parameters(recurse=False):
                p.data.add_(0.3 * torch.randn(p.shape, generator=g))
