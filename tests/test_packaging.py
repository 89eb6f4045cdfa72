"""The wheel that `pip install .` builds ships every package and every config file."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_every_folder_of_zoo_modules_is_a_package_setuptools_finds():
    """setup.py's discovery skips a folder without `__init__.py` silently: its modules would be
    missing from the wheel."""
    from setuptools import find_packages

    found = set(find_packages(str(ROOT), include=["zoo", "zoo.*"]))
    folders = {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "zoo").rglob("*.py") if "__pycache__" not in p.parts
    }
    assert folders <= found, f"folders of modules without __init__.py: {sorted(folders - found)}"
    setup = (ROOT / "setup.py").read_text()
    assert '"zoo.conf"' in setup and '"zoo.recipes"' in setup


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (path,) = out.glob("zoo-*.whl")
    return zipfile.ZipFile(path)


@pytest.mark.parametrize("folder", ["conf", "recipes"])
@pytest.mark.slow
def test_wheel_ships_every_config_file(wheel, folder):
    names = set(wheel.namelist())
    for path in (ROOT / folder).rglob("*.yaml"):
        rel = "/".join(path.relative_to(ROOT / folder).parts)
        assert f"zoo/{folder}/{rel}" in names, f"{folder}/{rel} is not in the wheel"
    assert "hydra_plugins/zoo_recipes/__init__.py" in names
    for path in (ROOT / "recipes").glob("*.sbatch"):  # the SLURM template users submit by hand
        assert f"zoo/recipes/{path.name}" in names, f"recipes/{path.name} is not in the wheel"


@pytest.mark.slow
def test_wheel_ships_every_module_and_the_console_scripts(wheel):
    names = set(wheel.namelist())
    for path in (ROOT / "zoo").rglob("*.py"):
        rel = "/".join(path.relative_to(ROOT).parts)
        assert rel in names, f"{rel} is not in the wheel"
    entry_points = wheel.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert {"zoo-train", "zoo-generate", "zoo-eval"} <= set(scripts)
    for name, target in scripts.items():
        assert f"{name} = {target}" in entry_points
        module = target.split(":")[0]
        assert module.replace(".", "/") + ".py" in names


def test_transformers_is_imported_only_lazily_and_only_by_interop():
    """transformers is an optional extra: no zoo module imports it when loaded, and only
    zoo.interop, the hf tokenizer and zoo-bench's peer adapters import it at all (inside the
    functions that need them)."""
    import ast

    allowed = ("zoo/interop/", "zoo/data/tokenizers/hf.py", "zoo/bench/peers/")
    for path in (ROOT / "zoo").rglob("*.py"):
        tree = ast.parse(path.read_text())
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if not any(n.split(".")[0] == "transformers" for n in names):
                continue
            rel = path.relative_to(ROOT).as_posix()
            assert id(node) not in top, f"{rel}:{node.lineno} imports transformers when the module loads"
            assert rel.startswith(allowed), f"{rel}:{node.lineno} imports transformers outside zoo.interop"
