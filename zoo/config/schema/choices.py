"""The model schema's own kinds that no facts table describes: how embeddings start, how the
width sets initialisation and multipliers, and what a parameter budget counts."""

from __future__ import annotations

from zoo.config.choice import Choice


class EmbedInit(Choice):
    """How the token embeddings are initialised."""

    std = "std"  # Normal(0, init_std), as every other table and matrix
    unit = "unit"  # Normal(0, D^-0.5): x sqrt(D) gives unit RMS (Vaswani et al. 2017; fairseq)


class Parametrization(Choice):
    """How initialisation, learning rates and multipliers depend on the width D."""

    standard = "standard"  # every matrix at init_std and optim.lr, whatever the width
    mup = "mup"  # Maximal Update Parametrization (Yang et al. 2022): tuned at a base width, transfers


class BudgetCounts(Choice):
    """Which parameters `model.param_budget` matches (they differ under model.ffn=moe)."""

    total = "total"  # every non-embedding parameter the model holds
    active = (
        "active"  # the non-embedding parameters one token passes through (a mixture's router, top-k and shared experts)
    )
