"""Cache location and content hashes."""

from pathlib import Path

from zoo.data.cache import cache_root, hash_texts


def test_cache_root_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "env"))
    assert cache_root(str(tmp_path / "explicit")) == tmp_path / "explicit"
    assert cache_root() == tmp_path / "env"
    monkeypatch.delenv("ZOO_CACHE")
    assert cache_root() == Path.home() / ".cache" / "zoo"


def test_hash_depends_on_text_boundaries_and_settings():
    base = hash_texts(["ab", "c"], {"kind": "char"})
    assert base == hash_texts(iter(["ab", "c"]), {"kind": "char"})
    assert base != hash_texts(["a", "bc"], {"kind": "char"})
    assert base != hash_texts(["ab", "c"], {"kind": "char", "vocab_size": 10})
