"""μP's per-parameter rules (Maximal Update Parametrization: Yang et al. 2022, "Tensor Programs
V", Tables 3 and 8, as the `mup` package implements them): which parameters are hidden matrices,
the std each starts at, and the learning-rate and weight-decay multipliers Adam and AdamW give it.

With m = D / base D (`ModelConfig.width_mult`; 1 under model.parametrization=standard):

- hidden matrices, every linear layer's weight in the model but the output projection (q/k/v/o
  and cross-attention projections, feed-forward in and out, the head transform): init std
  init_std / sqrt(m), learning rate lr / m, weight decay wd · m;
- vector-like parameters (token, token-type and position tables, relative-bias and Shaw tables,
  biases, norm gains, the output bias): init and learning rate as at the base width;
- the output layer, `lm_head` (untied: its own matrix; tied: the token table, which keeps the
  embedding's rules) and a classifier's head: init_std (not zero), learning rate lr.

On the forward (`ModelConfig`): the output projection reads its input x 1/m (mup's MuReadout and
MuSharedReadout: the logits, less their bias, x 1/m; `output_multiplier`), attention scores are
scaled by sqrt(base Dh)/Dh instead of 1/sqrt(Dh) (`attention_multiplier`), and the widths that
standard reads from D (the sqrt(D) embedding scale and its D^-0.5 start, scale_output's
D^-0.5, inverse_sqrt's D^-0.5) are read at the base width (`base_d_model`).

The weight decay of a hidden matrix grows with m as its rate shrinks, so AdamW's decay per step
(lr · wd) stays the base model's; mup's MuAdam and MuAdamW do the same. The output projection is
not zero-initialised (mup's MuReadout can be, with readout_zero_init=True; its default is not),
so that at m = 1 μP is the standard model exactly. Every width inside the hidden matrices (D,
d_ff, H·Dh) is taken to grow with D together, as in a sweep of d_model that keeps d_ff / D and
H·Dh / D; `mup.set_base_shapes` reads each matrix's own fan-in ratio, which is then the same m.
"""

from __future__ import annotations

import math

from torch import nn

from zoo.config.schema.model import ModelConfig


def is_hidden(module: nn.Module, head: nn.Module | None) -> bool:
    """Is `module` a linear layer whose weight is a hidden matrix (not the output projection
    `head`)?"""
    return isinstance(module, nn.Linear) and module is not head


def hidden_init_std(cfg: ModelConfig) -> float:
    """The std a hidden matrix starts at: init_std / sqrt(m) (variance ∝ 1/fan_in relative to
    the base model), init_std under standard."""
    return cfg.init_std / math.sqrt(cfg.width_mult)


def optimizer_scales(model: nn.Module, cfg: ModelConfig) -> dict[int, tuple[float, float]]:
    """{id(parameter): (learning-rate multiplier, weight-decay multiplier)} for the parameters
    whose rate differs from optim.lr: under mup the hidden matrices of `model`, (1/m, m); empty
    under standard and at m = 1. Read from the modules of `model` as they are now, so the ids
    are those of the sharded parameters once FSDP has sharded it."""
    m = cfg.width_mult
    if m == 1.0:
        return {}
    head = getattr(model, "lm_head", None)
    return {id(module.weight): (1.0 / m, m) for module in model.modules() if is_hidden(module, head)}
