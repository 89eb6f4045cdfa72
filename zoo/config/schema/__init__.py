"""Typed schemas of a run's config (the dataclasses `--help` is generated from), the conversion
of a composed DictConfig into them, and `validate`, every check a config must pass."""
