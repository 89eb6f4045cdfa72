"""Names a package exports and imports on first use (PEP 562), so that importing the package
loads none of the modules behind them: `import zoo` loads no torch, `zoo.data.files` loads no
loaders. Standard library only.

    _EXPORTS = {"build_model": "zoo.models", ...}
    __all__ = sorted(_EXPORTS)
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_exports(
    package: str, exports: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of `package`: `exports` maps each public
    name to the module that defines it; a name, once imported, is kept in `namespace` (the
    package's globals) so later lookups skip `__getattr__`."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
