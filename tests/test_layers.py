"""One-way layers: each package of zoo imports only the packages of the layers below it.

    config < nn < models < data, interop < tasks, harness < training < compare, bench, run < plan < cli

`config` holds the schemas and their checks and loads no torch; `nn` and `models` are pure
torch (no Lightning, Hydra or OmegaConf); packages on one layer do not import each other. The
check reads every import statement of every module, the ones inside functions included (a lazy
import is still an import), so a planted upward import fails it."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS: list[set[str]] = [
    {"config"},
    {"nn"},
    {"models"},
    {"data", "interop"},
    {"tasks", "harness"},
    {"training"},
    {"compare", "bench", "run"},
    {"plan"},
    {"cli"},
]
RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path) -> list[tuple[str, int]]:
    """(absolute module name, line) of every import of `path`, relative imports resolved."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((module, node.lineno))
            # `from zoo import nn` names a package, not an attribute
            found += [
                (f"{module}.{alias.name}", node.lineno)
                for alias in node.names
                if module == "zoo" and alias.name in RANK
            ]
    return found


def upward_imports(root: Path) -> list[str]:
    """Every import of a zoo module that runs against the layer order, as 'file:line: a -> b'."""
    problems = []
    for path in sorted((root / "zoo").rglob("*.py")):
        here = module_name(path, root).split(".")
        if len(here) < 2 or here[1] not in RANK:
            continue  # the package's front door (zoo/__init__.py) sits above every layer
        for module, line in imported_modules(path, root):
            there = module.split(".")
            if there[0] != "zoo":
                continue
            if len(there) < 2 or there[1] not in RANK:
                problems.append(f"{path.relative_to(root)}:{line}: {'.'.join(here)} -> {module} (the front door)")
            elif there[1] != here[1] and RANK[there[1]] >= RANK[here[1]]:
                problems.append(f"{path.relative_to(root)}:{line}: {'.'.join(here)} -> {module}")
    return problems


def test_every_package_has_a_layer():
    packages = {p.name for p in (ROOT / "zoo").iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(RANK), f"packages without a layer: {sorted(packages - set(RANK))}"
    loose = sorted(p.name for p in (ROOT / "zoo").glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules outside the layers: {loose}"


def test_no_module_imports_a_layer_above_its_own():
    assert upward_imports(ROOT) == []


# Inside a package, its rooms (subpackages, and the modules beside them) have layers of their
# own: a room imports only rooms of the layers below it. A module that sits in the package
# itself is a room of its own name. `if TYPE_CHECKING:` imports (type names only) do not count.
ROOMS: dict[str, list[set[str]]] = {
    "config": [{"paths", "lazy"}, {"errors"}, {"choice"}, {"facts"}, {"schema"}, {"records", "safety"}],
    "training": [
        {"stops", "quiet", "checkpoint", "monitor", "origin", "ema"},
        {"signals", "tracking"},
        {"distributed"},
        {"resume"},
        {"callbacks", "parts"},
        {"machine", "start", "fit", "finish", "evaluate"},
    ],
}
STEPS = {"machine", "start", "fit", "finish", "evaluate"}  # the run's steps call one another


def _room(package: str, module: str) -> str:
    return module.split(".")[2] if module.count(".") >= 2 else "__init__"


def _type_only_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            lines |= {n.lineno for stmt in node.body for n in ast.walk(stmt) if hasattr(n, "lineno")}
    return lines


def room_imports_upward(root: Path) -> list[str]:
    problems = []
    for package, layers in ROOMS.items():
        rank = {room: r for r, rooms in enumerate(layers) for room in rooms}
        for path in sorted((root / "zoo" / package).rglob("*.py")):
            here = _room(package, module_name(path, root))
            if here == "__init__":
                continue  # the package's front door
            skipped = _type_only_lines(ast.parse(path.read_text()))
            for module, line in imported_modules(path, root):
                if not module.startswith(f"zoo.{package}.") or line in skipped:
                    continue
                there = _room(package, module)
                if there == here or (here in STEPS and there in STEPS):
                    continue
                if there not in rank or here not in rank or rank[there] >= rank[here]:
                    problems.append(f"{path.relative_to(root)}:{line}: {here} -> {there}")
    return problems


def test_every_room_of_config_and_training_has_a_layer():
    for package, layers in ROOMS.items():
        rooms = {
            p.stem
            for p in (ROOT / "zoo" / package).iterdir()
            if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()
        }
        assert rooms == set().union(*layers), (
            f"zoo/{package}: rooms without a layer or gone: {rooms ^ set().union(*layers)}"
        )


def test_no_room_imports_a_room_above_its_own():
    assert room_imports_upward(ROOT) == []


def test_a_planted_upward_room_import_fails_the_check(tmp_path):
    shutil.copytree(ROOT / "zoo", tmp_path / "zoo", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "zoo" / "training" / "signals" / "planted.py").write_text("from zoo.training.parts import build_task\n")
    (tmp_path / "zoo" / "config" / "facts" / "planted.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from zoo.config.schema import model\n"
    )
    assert room_imports_upward(tmp_path) == ["zoo/training/signals/planted.py:1: signals -> parts"]


@pytest.mark.parametrize(
    "planted, where",
    [
        ("from zoo.training.fit import fit_run\n", "module"),
        ("def f():\n    from zoo.models import build_model\n    return build_model\n", "function"),
        ("from zoo import load_checkpoint\n", "module"),
        ("from zoo.compare import report\n", "module"),  # a sibling on the same layer as bench
    ],
)
@pytest.mark.slow
def test_a_planted_upward_import_fails_the_check(tmp_path, planted, where):
    shutil.copytree(ROOT / "zoo", tmp_path / "zoo", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "zoo" / ("bench" if "compare" in planted else "config") / "planted.py"
    target.write_text(planted)
    new = sorted(set(upward_imports(tmp_path)) - set(upward_imports(ROOT)))
    assert len(new) == 1 and "planted.py" in new[0], new


# Imports of zoo modules inside functions: the tools defer theirs so that `--help` and a refused
# command answer without loading torch; elsewhere only these, one breaking a real cycle and one
# keeping Lightning out of a comparison that does not evaluate checkpoints, one keeping torch out of
# a run's refusals and one out of a composition.
DEFERRED_OK = {
    ("zoo.config.schema.widths", "zoo.config.schema.params"),  # the count reads the schema's enums
    ("zoo.compare.report", "zoo.compare.lengths"),  # lengths= evaluates checkpoints; nothing else does
    # a run's claim refuses a config, its data files or this machine before torch loads
    ("zoo.run.preflight", "zoo.training.resume.point"),
    # a config composes without torch; only a branch's ${zoo.branch_end:} reads its parent checkpoint
    ("zoo.run.resolvers", "zoo.training.resume.branch"),
    # lm-evaluation-harness, an optional extra, is imported only by a run that scores tasks
    ("zoo.training.callbacks", "zoo.training.monitor.downstream"),
}


def deferred_imports(root: Path) -> list[str]:
    """Function-local imports of zoo modules outside zoo/cli and DEFERRED_OK."""
    found = []
    for path in sorted((root / "zoo").rglob("*.py")):
        name = module_name(path, root)
        if name.startswith("zoo.cli"):
            continue
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                modules = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and not node.level
                    else [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else []
                )
                for module in modules:
                    if module.startswith("zoo") and (name, module) not in DEFERRED_OK:
                        found.append(f"{path.relative_to(root)}:{node.lineno}: {name} -> {module}")
    return found


@pytest.mark.slow
def test_zoo_modules_are_imported_at_module_level():
    assert deferred_imports(ROOT) == []


def test_a_planted_function_local_import_is_found(tmp_path):
    shutil.copytree(ROOT / "zoo", tmp_path / "zoo", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "zoo" / "training" / "planted.py").write_text("def f():\n    from zoo.tasks import TASKS\n")
    assert [p for p in deferred_imports(tmp_path) if "planted" in p] == [
        "zoo/training/planted.py:2: zoo.training.planted -> zoo.tasks"
    ]


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint(' '.join(sorted(m.split('.')[0] for m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def _all_modules(package: str) -> str:
    paths = sorted((ROOT / "zoo" / package).rglob("*.py"))
    return "\n".join(f"import {module_name(p, ROOT)}" for p in paths)


def test_config_loads_no_torch():
    loaded = _loaded_after("import zoo.config\nimport zoo.config.schema.validate")
    assert "torch" not in loaded and "lightning" not in loaded
    assert "torch" not in _loaded_after(_all_modules("config"))


@pytest.mark.slow
def test_nn_and_models_load_no_lightning_hydra_or_omegaconf():
    loaded = _loaded_after(f"import zoo.nn, zoo.models\n{_all_modules('nn')}\n{_all_modules('models')}")
    assert "torch" in loaded
    assert not loaded & {"lightning", "pytorch_lightning", "hydra", "omegaconf"}, loaded & {
        "lightning",
        "hydra",
        "omegaconf",
    }


@pytest.mark.slow
def test_a_comparison_loads_no_torch_until_it_evaluates_lengths():
    """zoo-compare reads summaries and CSVs: it starts without torch and Lightning, and loads
    them only for lengths=, which evaluates checkpoints."""
    refused = "try:\n    zoo.cli.compare.main(['.', 'scale=seed'])\nexcept SystemExit:\n    pass"  # after reading DIR
    loaded = _loaded_after(f"import zoo.compare, zoo.cli.compare\n{refused}")
    assert not loaded & {"torch", "lightning"}, loaded & {"torch", "lightning"}
    assert "torch" in _loaded_after("import zoo.compare.lengths")


def test_every_module_says_what_it_owns_on_its_first_line():
    """A new engineer finds their room from the tree and the first lines alone."""
    silent = []
    for path in sorted((ROOT / "zoo").rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text()))
        if not doc or len(doc.splitlines()[0].split()) < 3:
            silent.append(str(path.relative_to(ROOT)))
    assert silent == []


def confusable_names(root: Path) -> list[tuple[str, str]]:
    """Rooms of one folder whose names differ only by a suffix (resume / resume_check,
    tracker / trackers)."""
    found = []
    for folder in sorted({p.parent for p in (root / "zoo").rglob("*.py")}):
        names = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
        names |= {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
        found += [
            (f"{folder.relative_to(root)}/{a}", b)
            for a in sorted(names)
            for b in sorted(names)
            if b.startswith(a + "_") or b == a + "s"
        ]
    return found


def test_no_two_rooms_differ_only_by_a_suffix(tmp_path):
    assert confusable_names(ROOT) == []
    (tmp_path / "zoo" / "training").mkdir(parents=True)
    for name in ("resume.py", "resume_check.py"):
        (tmp_path / "zoo" / "training" / name).write_text('"""A planted module."""\n')
    assert confusable_names(tmp_path) == [("zoo/training/resume", "resume_check")]


def test_no_test_module_imports_another():
    """What tests share lives in a conftest.py or a helper module beside them, not in a test
    module that another one imports (and runs again under another name)."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno}: {m}"
                for m in modules
                if m.startswith("tests.") and m.rpartition(".")[2].startswith("test_")
            ]
    assert found == []


# folders of tests/ that are tiers across packages, not a package's own tests
TEST_TIERS = {
    "gpu": "needs a CUDA GPU",
    "perf": "each speed switch against the plain path, across packages",
    "recipes": "the recipes/ folder",
    "contract": "every kind of every ablation axis (zoo/config/facts/axes.py), across packages",
}


def test_tests_mirror_zoo():
    """tests/PACKAGE/... holds the tests of zoo/PACKAGE/...: a test's folder names its room."""
    folders = {p.parent.relative_to(ROOT / "tests") for p in (ROOT / "tests").rglob("test_*.py")}
    strays = sorted(
        str(f) for f in folders if f.parts and f.parts[0] not in TEST_TIERS and not (ROOT / "zoo" / f).is_dir()
    )
    assert strays == []


def hydra_state_reads(root: Path) -> list[str]:
    """Every line of a zoo module outside zoo/cli and zoo/run that names Hydra's global state of
    the running job (`HydraConfig`), as 'file:line'."""
    found = []
    for path in sorted((root / "zoo").rglob("*.py")):
        if path.relative_to(root / "zoo").parts[0] in ("cli", "run"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "HydraConfig" in line:
                found.append(f"{path.relative_to(root)}:{number}")
    return found


def test_only_the_command_reads_hydras_job():
    """The run's origin (recipe, overrides, group choices, sweep) is passed down as data
    (`zoo.training.origin.RunOrigin`): no module below zoo/cli and zoo/run reads HydraConfig."""
    assert hydra_state_reads(ROOT) == []


def test_a_planted_hydra_state_read_is_found(tmp_path):
    (tmp_path / "zoo" / "training").mkdir(parents=True)
    (tmp_path / "zoo" / "cli").mkdir()
    (tmp_path / "zoo" / "cli" / "job.py").write_text("from hydra.core.hydra_config import HydraConfig\n")
    (tmp_path / "zoo" / "training" / "start.py").write_text("x = 1\nfrom hydra.core.hydra_config import HydraConfig\n")
    assert hydra_state_reads(tmp_path) == ["zoo/training/start.py:2"]
