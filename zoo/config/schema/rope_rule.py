"""A trained model's RoPE rule changed at run time: zoo-eval, zoo-generate and a fine-tuning
run (`init_from`) may stretch the positions of a checkpoint past its training length
(`model.position.scaling` and its keys), and nothing else about the architecture."""

from __future__ import annotations

from omegaconf import OmegaConf

from zoo.config.errors import ConfigError
from zoo.config.facts.rope import RUN_TIME_KEYS
from zoo.config.schema.model import ModelConfig


def check_rope_rule_keys(overrides: list[str], where: str) -> None:
    """Refuse on one line a `model.*` override other than RoPE's scaling rule (the keys of
    `zoo.config.facts.rope.RUN_TIME_KEYS`): a trained checkpoint keeps its architecture."""
    allowed = ", ".join(f"model.position.{key}" for key in RUN_TIME_KEYS)
    for item in overrides:
        key = item.split("=", 1)[0]
        if not key.startswith("model.position.") or key.removeprefix("model.position.") not in RUN_TIME_KEYS:
            raise ConfigError(
                f"{item}: {where} runs the checkpoint's architecture; only RoPE's scaling rule may change ({allowed})"
            )


def with_rope_rule(model: dict, overrides: list[str], where: str) -> dict:
    """A trained model's config (`model`, plain data as a checkpoint stores it) with RoPE's
    context-extension rule changed by `overrides` (`model.position.KEY=VALUE`): the rule
    changes buffers only, so the weights still fit. Another model key is refused on one line
    (`check_rope_rule_keys`), as is a rule the model's scheme does not read."""
    if not overrides:
        return model
    check_rope_rule_keys(overrides, where)
    given = OmegaConf.to_container(OmegaConf.from_dotlist(overrides), resolve=True)
    assert isinstance(given, dict)  # a dotlist reads back as a mapping
    changed = {**model, "position": {**model.get("position", {}), **given["model"]["position"]}}
    ModelConfig(**changed)  # the rule checked against the model: one line if it does not apply
    return changed
