"""zoo-train with every composition counted (a probe for the tests): `python -m
tests.cli.count_compositions FILE zoo-train overrides...` runs zoo-train's main() as the
console script does, with Hydra's config loader (`ConfigLoaderImpl.load_configuration`, which
`hydra.compose`, `hydra.main` and each job of a sweep go through) wrapped to count its calls,
and writes the count to FILE as the process ends. A fresh process: no composition is shared
with an earlier command. Run it with -m from the checkout's root, so that the checkout's zoo is
the one imported."""

import atexit
import functools
import sys
from pathlib import Path

from hydra._internal.config_loader_impl import ConfigLoaderImpl

from zoo.cli.train import main

COUNT_FILE = Path(sys.argv[1])
calls: list[str] = []
original = ConfigLoaderImpl.load_configuration


@functools.wraps(original)
def counted(self, config_name, overrides, run_mode, *args, **kwargs):
    calls.append(f"{config_name} {run_mode.name} {' '.join(overrides)}")
    return original(self, config_name, overrides, run_mode, *args, **kwargs)


ConfigLoaderImpl.load_configuration = counted  # type: ignore[method-assign]
atexit.register(lambda: COUNT_FILE.write_text("\n".join(calls) + "\n"))

sys.argv = ["zoo-train", *sys.argv[2:]]
main()
