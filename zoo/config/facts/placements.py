"""Where a block's norms sit (`model.norm`), in one torch-free table: what each placement
computes around a sub-layer f, where it comes from, how many norms it puts around each
sub-layer, whether the stack ends in a final norm, and what it costs. The model schema, the
blocks (`zoo.nn.block.SubLayer`), the parameter count (`zoo.config.schema.params`) and the axis
registry (`zoo.config.facts.axes`) read these rows; `tests/config/facts/test_block_tables.py`
keeps them in step with the built blocks."""

from __future__ import annotations

from dataclasses import dataclass

from zoo.config.choice import Choice


class NormPlacement(Choice):
    pre = "pre"  # x + f(norm(x)), final norm after the stack (Xiong et al. 2020)
    post = "post"  # norm(x + f(x)) (Vaswani et al. 2017)
    sandwich = "sandwich"  # x + norm_out(f(norm_in(x))), final norm (Gemma 2; Ding et al. 2021)
    reordered = "reordered"  # x + norm(f(x)), final norm (OLMo 2)


@dataclass(frozen=True, kw_only=True)
class PlacementFacts:
    """One placement's row.

    - `what`: the residual sub-layer it makes of a sub-layer f (x the residual stream).
    - `paper`: where it comes from.
    - `norms_per_sublayer`: the norms over D around each sub-layer (sandwich: one on the input,
      one on the output); each holds the parameters of `model.norm_type`'s row.
    - `final_norm`: the stack ends in a norm over D (every placement but post, whose last
      sub-layer already ends in one).
    - `normalizes_stream`: the residual stream itself is normalized after every sub-layer (post);
      otherwise the residual adds the sub-layer's output and is never rescaled. A parallel block
      of branches with norms of their own needs a stream that is not (`zoo.config.facts.blocks`).
    - `flops`: the elementwise cost per token and sub-layer (no matrix multiply: not part of
      `flops_per_token`, which counts those only).
    """

    what: str
    paper: str
    norms_per_sublayer: int
    final_norm: bool
    normalizes_stream: bool = False
    flops: str = "one norm over D"


PLACEMENT_FACTS: dict[NormPlacement, PlacementFacts] = {
    NormPlacement.pre: PlacementFacts(
        what="x + f(norm(x)); a final norm after the stack",
        paper="Xiong et al. 2020 (GPT-2, Llama)",
        norms_per_sublayer=1,
        final_norm=True,
    ),
    NormPlacement.post: PlacementFacts(
        what="norm(x + f(x)); no final norm",
        paper="Vaswani et al. 2017 (BERT, BART)",
        norms_per_sublayer=1,
        final_norm=False,
        normalizes_stream=True,
    ),
    NormPlacement.sandwich: PlacementFacts(
        what="x + norm_out(f(norm_in(x))); a final norm after the stack",
        paper="Ding et al. 2021 (CogView); Gemma Team 2024 (Gemma 2)",
        norms_per_sublayer=2,
        final_norm=True,
        flops="two norms over D",
    ),
    NormPlacement.reordered: PlacementFacts(
        what="x + norm(f(x)); a final norm after the stack",
        paper="OLMo Team 2024 (2 OLMo 2 Furious), after Liu et al. 2022 (Swin v2)",
        norms_per_sublayer=1,
        final_norm=True,
    ),
}
