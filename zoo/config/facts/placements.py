"""Where a block's norms sit (`model.norm`): the enum the model schema, the blocks and the axis
registry (`zoo.config.facts.axes`) share, torch-free."""

from __future__ import annotations

from zoo.config.choice import Choice


class NormPlacement(Choice):
    pre = "pre"  # x + f(norm(x)), final norm after the stack (Xiong et al. 2020)
    post = "post"  # norm(x + f(x)) (Vaswani et al. 2017)
