"""The one exception of a comparison the user can fix (`CompareError`): a metric, baseline,
tune= or scale= key or out= directory that cannot be used, or sweeps without a run to compare."""

from __future__ import annotations

from zoo.config.errors import ZooError


class CompareError(ZooError, ValueError):
    """Raised where the mistake is found; zoo-compare prints it as one line and exits 2. (Also
    a ValueError, for code that catches that.)"""
