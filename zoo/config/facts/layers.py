"""The keys that pick every k-th layer of a stack (`model.KEY=k`: the layers i with
(i + 1) % k == 0), in one table: `EVERY_KTH` names what such a layer becomes. A k past a
stack's depth picks no layer at all, so the key would be read and do nothing; `check_every_kth`
refuses it for every key of the table alike, naming the key and the depth it exceeds.
`tests/config/schema/test_every_kth.py` keeps the table in step with the model schema's `*_every`
fields."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zoo.config.errors import ConfigError
from zoo.config.facts.families import FAMILY_FACTS

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig

# key -> what its every k-th layer becomes (null: the key is unset, no layer is picked)
EVERY_KTH: dict[str, str] = {
    "global_every": "full (a global layer among the sliding or recurrent ones)",
    "moe_every": "a mixture",
}


def stack_depths(cfg: ModelConfig) -> list[tuple[str, int]]:
    """(the key that sets it, its layers) of each of the family's stacks."""
    depths = [("n_layers", cfg.n_layers)]
    if FAMILY_FACTS[cfg.family].cross_attention:
        depths.append(("n_decoder_layers", cfg.decoder_layers))
    return depths


def check_every_kth(cfg: ModelConfig) -> None:
    """Refuse a k past the depth of a stack (the keys checked as integers by their variants)."""
    for name, becomes in EVERY_KTH.items():
        k = getattr(cfg, name)
        if k is None:
            continue
        for depth_key, depth in stack_depths(cfg):
            if k > depth:
                raise ConfigError(
                    f"model.{name}={k} exceeds model.{depth_key}={depth}: no layer would be {becomes}; "
                    f"lower model.{name} to at most {depth}, or raise model.{depth_key}"
                )
