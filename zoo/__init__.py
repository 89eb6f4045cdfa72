"""zoo: a config-driven model zoo of Transformer architectures.

    import zoo
    cfg = zoo.compose(["model=llama", "model/position=alibi"])
    model = zoo.build_model(cfg.model)
    out = model(input_ids)          # out.logits: (B, T, V)
"""

from zoo.config import ConfigError, ModelConfig
from zoo.checkpoint import load_checkpoint
from zoo.config.compose import compose
from zoo.models import ModelOutput, ModelSummary, build_model, summarize

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "ModelConfig",
    "ModelOutput",
    "ModelSummary",
    "build_model",
    "compose",
    "load_checkpoint",
    "summarize",
]
