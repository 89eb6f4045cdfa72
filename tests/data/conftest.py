"""Shared fixtures: every test gets its own cache directory, so nothing touches ~/.cache."""

import pytest


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache dir, also exported as $ZOO_CACHE for code that uses the default."""
    path = tmp_path / "cache"
    monkeypatch.setenv("ZOO_CACHE", str(path))
    return str(path)
