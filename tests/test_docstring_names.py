"""Every dotted `zoo.x.y` name written in zoo's docstrings and comments, in docs/*.md, README.md
and the package READMEs names something that exists: a module or package (imported), an
attribute of one (looked up), or a name the code itself writes as a string (an OmegaConf
resolver such as `${zoo.now:...}`, a tracker tag such as `zoo.arm`, the packaged `zoo.conf`).
A module renamed or a function moved leaves no name behind it."""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# `zoo` and at least one dotted part; not a path (zoo/nn) nor the tail of another dotted name
NAME = re.compile(r"(?<![\w./-])zoo(?:\.[A-Za-z_]\w*)+")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]*$")  # NAME, KIND in a checklist: any one of them


def _docstrings_and_comments(source: str) -> Iterator[str]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield doc
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.string


def _strings_in_code(source: str) -> Iterator[str]:
    """The string constants of a module's code, docstrings left out (a docstring may not vouch
    for itself)."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.value


def written_names() -> dict[str, set[str]]:
    """name -> the files that write it."""
    found: dict[str, set[str]] = {}

    def add(texts, path: Path) -> None:
        for text in texts:
            for name in NAME.findall(text):
                found.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())

    for path in sorted((ROOT / "zoo").rglob("*.py")):
        add(_docstrings_and_comments(path.read_text()), path)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "zoo").rglob("README.md"))]
    for path in pages:
        add([path.read_text()], path)
    return found


def names_in_code() -> set[str]:
    return {
        name
        for path in (ROOT / "zoo").rglob("*.py")
        for s in _strings_in_code(path.read_text())
        for name in NAME.findall(s)
    }


def exists(name: str) -> bool:
    """The longest importable module prefix of `name`, then the rest looked up as attributes."""
    parts = name.split(".")
    while parts and PLACEHOLDER.match(parts[-1]):
        parts.pop()
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and not module_name.startswith(exc.name):
                raise  # the module exists but a package it imports is missing: say so
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_the_scan_finds_the_names_it_checks():
    found = written_names()
    assert {"zoo.nn.position", "zoo.compare.scale", "zoo.config.facts.axes.AXES"} <= set(found)
    assert len(found) > 100
    assert NAME.findall("see zoo/nn/cache.py, a.zoo.x and `zoo.nn.cache.KVCache`.") == ["zoo.nn.cache.KVCache"]
    assert not exists("zoo.nn.no_such_module") and not exists("zoo.nn.cache.NoSuchClass")
    assert exists("zoo.nn.cache.KVCache.update") and exists("zoo.data.corpora.NAME")


def test_every_dotted_zoo_name_in_the_docstrings_and_docs_exists():
    spoken = names_in_code()
    missing = {
        name: sorted(files) for name, files in written_names().items() if name not in spoken and not exists(name)
    }
    assert not missing, f"names of nothing that exists (name: where it is written): {missing}"
