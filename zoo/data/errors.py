"""The one exception type for data that cannot be used."""

from __future__ import annotations

from zoo.config.errors import ZooError


class DataError(ZooError, ValueError):
    """A file, column, label or corpus that cannot become batches. The message is one line
    that names what is wrong (the path, the column, the value) and what would work. (Also a
    ValueError, for code that catches that; tools catch ZooError.)"""
