"""The one exception type for bad configuration, and one-line explanations of Hydra's."""

from __future__ import annotations

import dataclasses


class ConfigError(ValueError):
    """A configuration value or combination that cannot work. The message is one line that
    names the key(s), the offending value(s) and what is allowed."""


def explain(exc: BaseException) -> str:
    """One line from an exception chain of Hydra / OmegaConf composition errors: the first line
    of every message, plus the allowed keys when a key is unknown."""
    parts: list[str] = []
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = str(e).strip()
        line = text.splitlines()[0].rstrip(".") if text else type(e).__name__
        if "$VALUE" in line:
            line = ""
        if line and line not in parts:
            parts.append(line)
        if "Available options" in text:
            listed = text.split("Available options", 1)[1].split("Config search path", 1)[0]
            options = [s.strip() for s in listed.splitlines() if s.startswith("\t")]
            parts.append("available: " + ", ".join(options))
        object_type = getattr(e, "object_type", None)
        if "not in" in line and dataclasses.is_dataclass(object_type):
            allowed = ", ".join(f.name for f in dataclasses.fields(object_type))
            parts.append(f"allowed keys: {allowed}")
        e = e.__cause__
    return ": ".join(parts)
