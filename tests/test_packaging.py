"""The wheel that `pip install .` builds ships every package and every config file, and zoo-train
finds its recipes installed either way (`pip install .`, `pip install -e .`)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
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


def _beside_this_environment(folder: Path) -> Path:
    """A virtual environment that reads this one's packages (through links in one folder named by
    a .pth file) except zoo and its Hydra plugin, so that the zoo installed in it is the only one."""
    links = folder / "packages"
    (links / "hydra_plugins").mkdir(parents=True)
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        name = entry.name.lower()
        if name in ("hydra_plugins", "__pycache__") or name.startswith(("zoo", "__editable__")) or "zoo" in name:
            continue
        (links / entry.name).symlink_to(entry)
    for plugin in (site / "hydra_plugins").glob("*"):
        if plugin.name not in ("zoo_recipes", "__pycache__"):
            (links / "hydra_plugins" / plugin.name).symlink_to(plugin)
    env = folder / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    (next(env.glob("lib/python*/site-packages")) / "packages.pth").write_text(f"{links}\n")
    return env


@pytest.mark.parametrize("mode", [[], ["--editable"]], ids=["install", "editable"])
@pytest.mark.slow
def test_an_installed_zoo_train_runs_a_recipe_however_it_was_installed(tmp_path, mode):
    """`pip install -e .` (setuptools' default editable mode, what a contributor runs) maps zoo's
    modules from the checkout without a `hydra_plugins/zoo_recipes` folder for Hydra's plugin scan
    to list: `-cn quick` was "Cannot find primary config 'quick'" while the line listed quick.
    zoo registers its search path itself; both installs find the recipe, from outside the checkout."""
    env = _beside_this_environment(tmp_path)
    python = env / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([*install, *mode, str(ROOT)], check=True, capture_output=True, timeout=300, env=clean)
    work = tmp_path / "work"
    work.mkdir()
    result = subprocess.run(
        [str(env / "bin" / "zoo-train"), "-cn", "quick", "--cfg", "job"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        env=clean,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "d_model: 64" in result.stdout and list(work.iterdir()) == []
    where = subprocess.run(
        [str(python), "-c", "import zoo; print(zoo.__file__)"], cwd=work, capture_output=True, text=True, env=clean
    )
    assert (where.stdout.strip().startswith(str(ROOT))) == bool(mode), where.stdout  # the copy installed


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
