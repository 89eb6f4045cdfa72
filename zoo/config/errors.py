"""The base of every error a user can cause (`ZooError`), the one exception type for bad
configuration, and one-line explanations of Hydra's."""

from __future__ import annotations

import dataclasses

from zoo.config.paths import recipe_names


class ZooError(Exception):
    """An error the user caused and can fix: a bad key or value, a file, column or checkpoint
    that cannot be used. Every tool prints its message as one line, `TOOL: error: MESSAGE`, and
    exits with status 2; any other exception is a bug in zoo and keeps its traceback."""


class ConfigError(ZooError, ValueError):
    """A configuration value or combination that cannot work. The message is one line that
    names the key(s), the offending value(s) and what is allowed. (Also a ValueError, for code
    that catches that; tools catch ZooError.)"""


class CheckpointError(ZooError, ValueError):
    """A checkpoint path that does not exist, is truncated, or is not a zoo checkpoint. (Also a
    ValueError, for code that catches that; tools catch ZooError.)"""


def zoo_error_in(exc: BaseException) -> ZooError | None:
    """The ZooError an exception was raised from, if any: a refusal that came through a library,
    e.g. a `${zoo.*}` resolver's, which OmegaConf wraps in its own error (raised while handling
    it, not from it)."""
    from omegaconf.errors import OmegaConfBaseException

    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        if isinstance(e, ZooError):
            return e
        seen.add(id(e))
        e = e.__cause__ or (e.__context__ if isinstance(e, OmegaConfBaseException) else None)
    return None


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
        rest = [part.strip() for part in text.splitlines()[1:] if part.strip()]
        if line.endswith(":") and rest:  # "... raised while composing config:" says what on the next line
            line = f"{line} {rest[0].rstrip('.')}"
        if "$VALUE" in line:
            line = ""
        if line and line not in parts:
            parts.append(line)
        if "Cannot find primary config" in line:
            parts[-1] = line.split(". Check")[0]
            parts.append(f"recipes (-cn NAME): {', '.join(recipe_names())}")
        if "Available options" in text:
            listed = text.split("Available options", 1)[1].split("Config search path", 1)[0]
            options = [s.strip() for s in listed.splitlines() if s.startswith("\t")]
            parts.append("available: " + ", ".join(options))
        object_type = getattr(e, "object_type", None)
        if "not in" in line and dataclasses.is_dataclass(object_type):
            import difflib

            names = [f.name for f in dataclasses.fields(object_type)]
            close = difflib.get_close_matches(str(getattr(e, "key", "") or ""), names, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            parts.append(f"{hint}allowed keys: {', '.join(names)}")
        elif "not in struct" in line and getattr(e, "parent_node", None) is not None:
            parts.append(_known_keys(e))
        e = e.__cause__
    return ": ".join(parts)


def _known_keys(e) -> str:
    """The keys of the node an unknown key was given to, the closest first when one is close."""
    import difflib

    keys = [str(k) for k in e.parent_node.keys()]
    key = str(getattr(e, "key", "") or "")
    close = difflib.get_close_matches(key, keys, n=1)
    prefix = (e.full_key or key).rsplit(".", 1)[0] if "." in (e.full_key or "") else ""
    name = f"{prefix}.{close[0]}" if prefix and close else (close[0] if close else "")
    hint = f"did you mean {name}? " if close else ""
    extra = f"; a key the file does not list is added with +{prefix}.NAME=VALUE" if prefix else ""
    return f"{hint}keys: {', '.join(keys)}{extra}"
