"""Facts about each feed-forward activation (`model.activation`), in one torch-free table:
gated or not, the torch function that computes it (and its GELU approximation), where it comes
from. The model schema (the default d_ff), the parameter and FLOP counts and the bench peers
read these rows; `zoo.nn.feedforward.ACTIVATIONS` is built from them, and
`tests/config/facts/test_activation_table.py` keeps the two in step."""

from __future__ import annotations

from dataclasses import dataclass

from zoo.config.choice import Choice


class Activation(Choice):
    relu = "relu"
    gelu = "gelu"
    gelu_tanh = "gelu_tanh"  # GELU's tanh approximation (Hendrycks & Gimpel 2016), as in GPT-2
    swiglu = "swiglu"  # Shazeer 2020, GLU variants
    geglu = "geglu"
    geglu_tanh = "geglu_tanh"  # GeGLU with the tanh GELU, as in T5 v1.1 ("gated-gelu")
    relu2 = "relu2"  # ReLU squared, max(0, x)² (So et al. 2021, Primer; modded-nanogpt)


@dataclass(frozen=True, kw_only=True)
class ActivationFacts:
    """One activation's row.

    - `gated`: a gated linear unit, act(x W_gate) ⊙ (x W_up) (Shazeer 2020): the unit has three
      D × d_ff matrices instead of two, and the default d_ff is 8/3·D instead of 4·D.
    - `function`: the name of the `torch.nn.functional` function applied (to the gate, when
      gated).
    - `approximate`: its GELU approximation ("none" or "tanh"; "none" for the others).
    - `paper`: where it comes from.
    - `squared`: the function's output is squared, f(x)² (ReLU², Primer): elementwise, no
      parameter or matrix multiply added.
    """

    gated: bool
    function: str
    paper: str
    approximate: str = "none"
    squared: bool = False


ACTIVATION_FACTS: dict[Activation, ActivationFacts] = {
    Activation.relu: ActivationFacts(gated=False, function="relu", paper="Nair & Hinton 2010; Vaswani et al. 2017"),
    Activation.gelu: ActivationFacts(gated=False, function="gelu", paper="Hendrycks & Gimpel 2016; BERT"),
    Activation.gelu_tanh: ActivationFacts(
        gated=False, function="gelu", approximate="tanh", paper="Hendrycks & Gimpel 2016, tanh approximation; GPT-2"
    ),
    Activation.swiglu: ActivationFacts(gated=True, function="silu", paper="Shazeer 2020 (GLU variants); Llama"),
    Activation.geglu: ActivationFacts(gated=True, function="gelu", paper="Shazeer 2020 (GLU variants)"),
    Activation.geglu_tanh: ActivationFacts(
        gated=True, function="gelu", approximate="tanh", paper="Shazeer 2020; T5 v1.1 and Gemma (gated-gelu)"
    ),
    Activation.relu2: ActivationFacts(
        gated=False,
        function="relu",
        squared=True,
        paper="So et al. 2021 (Primer: squared ReLU); modded-nanogpt's speedrun records",
    ),
}

# the gated linear units, in table order
GATED = tuple(kind for kind, facts in ACTIVATION_FACTS.items() if facts.gated)
