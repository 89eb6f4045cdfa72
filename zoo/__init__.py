"""zoo: a config-driven model zoo of Transformer architectures.

    import zoo
    cfg = zoo.compose(["model=llama", "model/position=alibi"])
    model = zoo.build_model(cfg.model)
    out = model(input_ids)          # out.logits: (B, T, V)
    outcome = zoo.train(cfg, "runs/mine")   # as zoo-train runs it: lock, resume, records

The names below are imported on first use, so `import zoo.config` loads no torch and
`import zoo.nn` loads no Hydra (each layer imports only the layers below it).
"""

from __future__ import annotations

from zoo.config.lazy import lazy_exports

__version__ = "0.1.0"

# public name -> the module that defines it
_PUBLIC = {
    "ZooError": "zoo.config.errors",
    "ConfigError": "zoo.config.errors",
    "ModelConfig": "zoo.config.schema.model",
    "ZooConfig": "zoo.config.schema.root",
    "compose": "zoo.cli.compose",
    "validate": "zoo.config.schema.validate",
    "ModelOutput": "zoo.models",
    "ModelSummary": "zoo.models",
    "build_model": "zoo.models",
    "summarize": "zoo.models",
    "load_checkpoint": "zoo.training.checkpoint.files",
    "train": "zoo.run.lifecycle",
    "RunOutcome": "zoo.run.outcome",
    "Outcome": "zoo.run.outcome",
}

__all__ = sorted(_PUBLIC)

__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC, globals())
