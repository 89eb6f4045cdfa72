"""Mutation testing of zoo's core: plant one small bug at a time, run the tests that guard that
module, and count the bugs no test notices.

    python benchmarks/mutate.py --per-module 12          # the committed run: a fixed sample per module
    python benchmarks/mutate.py                          # every mutant of every core module (hours)
    python benchmarks/mutate.py --modules zoo/nn/cache.py zoo/compare/stats.py
    python benchmarks/mutate.py --planted                # only the named bugs of PLANTED
    python benchmarks/mutate.py --list                   # what would be tried, without running
    python benchmarks/mutate.py --again                  # rerun the last report's survivors (new tests)
    python benchmarks/mutate.py --per-module 4 --seed 1 --exclude mutation --report mutation_heldout
                                                         # a fresh sample, none of the first one's mutants

Needs `coverage` (pip install coverage). Works on a scratch copy of the tracked files, so the
working tree is never modified. Each module's tests run once under coverage; a mutant on a line
those tests never execute is reported as "not reached" without running them. Every other mutant
is written into the copy and its tests run with `-x`: a failure (or a crash, or a run past
3 x the clean run's time) kills it; a pass means it survived.

A survivor that cannot change any observable behaviour is equivalent: listed, with its reason, in
benchmarks/mutation_equivalent.json (key: "path:line:col description"), and left out of the score; a
survivor that no test kills yet is explained in benchmarks/mutation_survivors.json (same keys).
Results go to benchmarks/results/mutation.json and mutation.md."""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
EQUIVALENT = ROOT / "benchmarks" / "mutation_equivalent.json"
SURVIVORS = ROOT / "benchmarks" / "mutation_survivors.json"  # known survivors: why no test kills them yet

# module patterns -> the tests that guard them (fast, in-process tests first: `-x` stops at the first failure)
# the tests that run the model code: hand-worked values, the cache, the model options, attention
# direction, parity with torch.nn.Transformer and with transformers' own models (code nobody here
# wrote), decoding with and without caches
MODEL_TESTS = [
    "tests/nn/test_known_values.py",
    "tests/nn/test_units_by_hand.py",
    "tests/nn/test_positions.py",
    "tests/nn/test_kv_cache.py",
    "tests/models/test_reference_parity.py",
    "tests/models/test_variants.py",
    "tests/models/test_head_options.py",
    "tests/models/test_direction.py",
    "tests/models/test_budget.py",
    "tests/interop/test_hf.py",
    "tests/models/test_generate.py",
    "tests/models/test_decoding_rows.py",
]
TARGETS: list[tuple[str, list[str]]] = [
    ("zoo/nn/chunked_loss.py", ["tests/perf/test_speed_switches.py", "-k", "chunked"]),
    ("zoo/nn/*.py", MODEL_TESTS),
    ("zoo/nn/position/*.py", MODEL_TESTS),
    ("zoo/models/*.py", MODEL_TESTS),
    ("zoo/data/resumable.py", ["tests/data/test_resumable.py"]),
    ("zoo/tasks/optim.py", ["tests/tasks/test_optim.py"]),
    ("zoo/training/resume/rng.py", ["tests/training/resume/test_rng.py"]),
    ("zoo/training/checkpoint/saving.py", ["tests/training/checkpoint/test_atomic_save.py"]),
    ("zoo/compare/stats.py", ["tests/compare/test_stats.py"]),
    ("zoo/compare/powerlaw.py", ["tests/compare/test_powerlaw.py"]),
    ("zoo/training/tracking/identity.py", ["tests/training/tracking/test_tracker_parts.py"]),
    ("zoo/interop/hf/*.py", ["tests/interop/test_hf.py"]),
]
# the core: what the committed run covers
CORE = [
    "zoo/nn/attention.py",
    "zoo/nn/block.py",
    "zoo/nn/cache.py",
    "zoo/nn/chunked_loss.py",
    "zoo/nn/embedding.py",
    "zoo/nn/feedforward.py",
    "zoo/nn/mask.py",
    "zoo/nn/norm.py",
    "zoo/nn/position/alibi.py",
    "zoo/nn/position/base.py",
    "zoo/nn/position/learned.py",
    "zoo/nn/position/relative.py",
    "zoo/nn/position/rope.py",
    "zoo/nn/position/shaw.py",
    "zoo/nn/position/sinusoidal.py",
    "zoo/models/base.py",
    "zoo/models/decoder_only.py",
    "zoo/models/encoder_decoder.py",
    "zoo/models/encoder_only.py",
    "zoo/models/generate.py",
    "zoo/data/resumable.py",
    "zoo/tasks/optim.py",
    "zoo/training/resume/rng.py",
    "zoo/training/checkpoint/saving.py",
    "zoo/compare/stats.py",
    "zoo/interop/hf/common.py",
    "zoo/interop/hf/gpt2.py",
    "zoo/interop/hf/llama.py",
    "zoo/interop/hf/t5.py",
    "zoo/interop/hf/bert.py",
    "zoo/interop/hf/bart.py",
]

# Realistic bugs, each a literal source edit; every one must fail a test (of the module's
# tests, or of the tests named after it).
PLANTED: list[tuple] = [  # (name, path, old, new[, tests])
    (
        "reorder keys but not values",
        "zoo/nn/cache.py",
        "self._k, self._v = keys[index], values[index]",
        "self._k, self._v = keys[index], values",
    ),
    (
        "reorder keys but not values, seen by beam search alone",
        "zoo/nn/cache.py",
        "self._k, self._v = keys[index], values[index]",
        "self._k, self._v = keys[index], values",
        ["tests/models/test_decoding_rows.py"],
    ),
    (
        "loader position not multiplied by the ranks",
        "zoo/data/resumable.py",
        "self._epoch_batches * self.batch_size * replicas",
        "self._epoch_batches * self.batch_size",
    ),
    (
        "cosine warmup boundary",
        "zoo/tasks/optim.py",
        "    def cosine(step: int) -> float:\n        if step < warmup:",
        "    def cosine(step: int) -> float:\n        if step <= warmup:",
    ),
    (
        "Student's pooled test in place of Welch's",
        "zoo/compare/stats.py",
        "stats.ttest_ind(a, b, equal_var=False)",
        "stats.ttest_ind(a, b)",
    ),
    ("top-p boundary", "zoo/models/generate.py", "drop_sorted = before >= top_p", "drop_sorted = before > top_p"),
    # a bug of one kind, which only the covering designs' rows meet (tests named: the grids alone)
    (
        "LayerNorm's row counts no bias",
        "zoo/config/facts/norms.py",
        "parameters=lambda D, bias: D * (2 if bias else 1),",
        "parameters=lambda D, bias: D,",
        ["tests/contract/test_axes.py", "-k", "row_of_every"],
    ),
    (
        "per-head QK-norm on the queries alone",
        "zoo/nn/attention.py",
        "return getattr(self, norm)(heads) if self.qk_norm == QKNorm.head else heads",
        'return getattr(self, norm)(heads) if self.qk_norm == QKNorm.head and norm == "q_norm" else heads',
        ["tests/models/test_variants.py", "-k", "test_a_row"],
    ),
]

_CMP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_BIN = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
}
_SYM = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.And: "and",
    ast.Or: "or",
}
_SWAP_CALLS = {
    "min": "max",
    "max": "min",
    "any": "all",
    "all": "any",
    "minimum": "maximum",
    "maximum": "minimum",
    "amin": "amax",
    "amax": "amin",
}
_QUIET_CALLS = {"info", "debug", "warning", "warn", "print", "echo", "register_buffer_note"}


@dataclass
class Mutant:
    path: str
    line: int
    col: int
    description: str
    node_index: int  # position of the node in ast.walk order
    operator: str
    statement_line: int  # first line of the statement holding it: the line coverage reports
    outcome: str = "pending"  # killed, survived, timeout, not reached, equivalent
    seconds: float = 0.0
    failed_test: str = ""
    reason: str = ""

    @property
    def key(self) -> str:
        return f"{self.path}:{self.line}:{self.col} {self.description}"


def _skipped_nodes(tree: ast.AST, source_lines: list[str]) -> set[int]:
    """ids of nodes that are not behaviour worth mutating: docstrings, messages of raise and log
    calls, type annotations, assert statements, `# pragma: no mutate` lines, TYPE_CHECKING blocks."""
    skip: set[int] = set()

    def drop(node):
        for sub in ast.walk(node):
            skip.add(id(sub))

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            drop(body[0])
        if isinstance(node, (ast.Raise, ast.Assert, ast.JoinedStr, ast.Import, ast.ImportFrom)):
            drop(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
                if a.annotation is not None:
                    drop(a.annotation)
            if node.returns is not None:
                drop(node.returns)
            for d in node.decorator_list:
                drop(d)
        if isinstance(node, ast.ClassDef):
            for d in node.decorator_list:
                drop(d)
        if isinstance(node, ast.AnnAssign):
            drop(node.annotation)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            drop(node)
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in _QUIET_CALLS:
                drop(node)
        lineno = getattr(node, "lineno", None)
        if lineno is not None and "pragma: no mutate" in source_lines[lineno - 1]:
            drop(node)
    return skip


def _mutations(node: ast.AST) -> list[tuple[str, str]]:
    """(operator, description) pairs for one node."""
    out = []
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _CMP:
                out.append((f"cmp{i}", f"`{_SYM[type(op)]}` -> `{_SYM[_CMP[type(op)]]}`"))
    elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _BIN:
        out.append(("binop", f"`{_SYM[type(node.op)]}` -> `{_SYM[_BIN[type(node.op)]]}`"))
    elif isinstance(node, ast.BoolOp):
        other = ast.Or if isinstance(node.op, ast.And) else ast.And
        out.append(("boolop", f"`{_SYM[type(node.op)]}` -> `{_SYM[other]}`"))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub, ast.Invert)):
        sym = {ast.Not: "not ", ast.USub: "-", ast.Invert: "~"}[type(node.op)]
        out.append(("unary", f"drop `{sym.strip()}`"))
    elif isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool):
            out.append(("const", f"{v} -> {not v}"))
        elif isinstance(v, int):
            out.append(("const", f"{v} -> {v + 1}"))
        elif isinstance(v, float):
            out.append(("const", f"{v!r} -> {(v * 2 if v else 1.0)!r}"))
    elif isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name in _SWAP_CALLS:
            out.append(("call", f"`{name}` -> `{_SWAP_CALLS[name]}`"))
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) or (
        isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
    ):
        text = ast.unparse(node).splitlines()[0]
        out.append(("delete", f"delete `{text[:70]}`"))
    return out


def _apply(node: ast.AST, operator: str) -> ast.AST | None:
    """Mutate `node` in place; a statement deletion returns the `pass` that replaces it."""
    # each operator is one `_mutations` offers for this kind of node
    if operator.startswith("cmp"):
        assert isinstance(node, ast.Compare)
        i = int(operator[3:])
        node.ops[i] = _CMP[type(node.ops[i])]()
    elif operator == "binop":
        assert isinstance(node, (ast.BinOp, ast.AugAssign))
        node.op = _BIN[type(node.op)]()
    elif operator == "boolop":
        assert isinstance(node, ast.BoolOp)
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif operator == "unary":
        assert isinstance(node, ast.UnaryOp)
        return node.operand
    elif operator == "const":
        assert isinstance(node, ast.Constant)
        v = node.value
        assert isinstance(v, (bool, int, float))  # the constants `_mutations` changes
        node.value = (not v) if isinstance(v, bool) else v + 1 if isinstance(v, int) else (v * 2 if v else 1.0)
    elif operator == "call":
        assert isinstance(node, ast.Call)
        f = node.func
        if isinstance(f, ast.Attribute):
            f.attr = _SWAP_CALLS[f.attr]
        else:
            assert isinstance(f, ast.Name)
            f.id = _SWAP_CALLS[f.id]
    elif operator == "delete":
        return ast.Pass()
    return None


class _Replace(ast.NodeTransformer):
    def __init__(self, target: ast.AST, replacement: ast.AST):
        self.target, self.replacement = target, replacement

    def visit(self, node):
        if node is self.target:
            return ast.copy_location(self.replacement, node)
        return super().visit(node)


def mutants_of(path: str) -> list[Mutant]:
    source = (ROOT / path).read_text()
    tree = ast.parse(source)
    skip = _skipped_nodes(tree, source.splitlines())
    statement_line = {}
    for stmt in ast.walk(tree):  # outer statements first, so the innermost one wins
        if isinstance(stmt, ast.stmt):
            for sub in ast.walk(stmt):
                statement_line[id(sub)] = stmt.lineno
    found = []
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in skip or not isinstance(node, (ast.expr, ast.stmt)):  # the nodes with a place
            continue
        for operator, description in _mutations(node):
            found.append(
                Mutant(
                    path,
                    node.lineno,
                    node.col_offset,
                    description,
                    index,
                    operator,
                    statement_line.get(id(node), node.lineno),
                )
            )
    return found


def mutated_source(m: Mutant) -> str:
    tree = ast.parse((ROOT / m.path).read_text())
    node = list(ast.walk(tree))[m.node_index]
    replacement = _apply(node, m.operator)
    if replacement is not None:
        tree = _Replace(node, replacement).visit(tree)
        ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"


def tests_for(path: str) -> list[str]:
    for pattern, tests in TARGETS:
        if fnmatch.fnmatch(path, pattern):
            return tests
    raise SystemExit(f"mutate: no tests are named for {path} in TARGETS")


def _scratch_copy() -> Path:
    work = Path(tempfile.mkdtemp(prefix="zoo-mutate-"))
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for rel in files:
        src = ROOT / rel
        if src.is_file():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, work / rel)
    return work


def _env(work: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(work) + os.pathsep + env.get("PYTHONPATH", "")  # subprocesses import the copy too
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _pytest(work: Path, tests: list[str], timeout: float, extra: Sequence[str] = ()) -> tuple[int, float, str]:
    cmd = [sys.executable, *extra, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *tests]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=work, env=_env(work), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, time.perf_counter() - start, ""
    failed = next(
        (
            line.split(" ", 1)[1].split(" - ")[0]
            for line in done.stdout.splitlines()
            if line.startswith(("FAILED ", "ERROR "))
        ),
        "",
    )
    return done.returncode, time.perf_counter() - start, failed


def covered_lines(work: Path, tests: list[str], modules: list[str]) -> tuple[dict[str, set[int]], float]:
    """Run `tests` once on the clean copy under coverage: lines executed per module, and the time."""
    data = work / ".coverage-mutate"
    include = ",".join(str(work / m) for m in modules)
    rc, seconds, failed = _pytest(
        work, tests, timeout=3600, extra=["-m", "coverage", "run", f"--data-file={data}", f"--include={include}"]
    )
    if rc != 0:
        raise SystemExit(f"mutate: the clean tests fail ({' '.join(tests)}: {failed or f'exit {rc}'}); fix them first")
    import coverage

    cov = coverage.Coverage(data_file=str(data))
    cov.load()
    lines = {m: set(cov.get_data().lines(str(work / m)) or ()) for m in modules}
    data.unlink()
    return lines, seconds


def run_mutant(work: Path, m: Mutant, tests: list[str], timeout: float) -> None:
    target = work / m.path
    original = target.read_text()
    target.write_text(mutated_source(m))
    try:
        rc, m.seconds, m.failed_test = _pytest(work, tests, timeout)
    finally:
        target.write_text(original)
    m.outcome = "timeout" if rc == -1 else "survived" if rc == 0 else "killed"


def run_planted(work: Path) -> list[dict]:
    out = []
    for name, path, old, new, *tests in PLANTED:
        target = work / path
        original = target.read_text()
        if original.count(old) != 1:
            raise SystemExit(f"mutate: planted bug {name!r}: {old!r} is not in {path} exactly once")
        target.write_text(original.replace(old, new))
        try:
            rc, seconds, failed = _pytest(work, tests[0] if tests else tests_for(path), timeout=1800)
        finally:
            target.write_text(original)
        out.append({"bug": name, "path": path, "caught": rc != 0, "failed_test": failed, "seconds": round(seconds, 1)})
        print(f"planted {'caught' if rc else 'MISSED'}: {name} ({failed})", flush=True)
    return out


def score(mutants: list[Mutant]) -> dict:
    counts = {
        k: sum(m.outcome == k for m in mutants) for k in ("killed", "timeout", "survived", "not reached", "equivalent")
    }
    live = counts["killed"] + counts["timeout"] + counts["survived"] + counts["not reached"]
    return {**counts, "score": round((counts["killed"] + counts["timeout"]) / live, 4) if live else None}


def write_report(mutants: list[Mutant], planted: list[dict], args, seconds: float, history: list[str]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    by_module: dict[str, list[Mutant]] = {}
    for m in mutants:
        by_module.setdefault(m.path, []).append(m)
    total = score(mutants)
    command = " ".join(["python benchmarks/mutate.py", *sys.argv[1:]])
    history = [*history, command]
    record = {
        "command": command,
        "history": history,
        "seconds": round(seconds),
        "seed": args.seed,
        "per_module": args.per_module,
        "total": total,
        "modules": {p: score(ms) for p, ms in by_module.items()},
        "mutants": [asdict(m) | {"key": m.key} for m in mutants],
        "planted": planted,
    }
    (RESULTS / f"{args.report}.json").write_text(json.dumps(record, indent=1) + "\n")
    lines = [
        "# Mutation testing of the core",
        "",
        f"Commands: {', then '.join(f'`{c}`' for c in history)} ({round(seconds / 60)} min in all; "
        "`--again` reruns the mutants the previous run did not kill).",
        "",
        "One mutant at a time is written into a",
        "copy of the tree and the module's tests (benchmarks/mutate.py `TARGETS`) run with `-x`.",
        "",
    ]
    if mutants:
        lines += [
            f"**Score: {total['killed'] + total['timeout']} killed of "
            f"{len(mutants) - total['equivalent']} non-equivalent mutants "
            f"({100 * (total['score'] or 0):.1f}%)**; {total['equivalent']} equivalent, "
            f"{total['not reached']} on lines the tests never run, {total['survived']} survived.",
            "",
            "| module | mutants | killed | timeout | survived | not reached | equivalent | score |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for p, s in record["modules"].items():
            n = len(by_module[p])
            pct = "-" if s["score"] is None else f"{100 * s['score']:.0f}%"
            lines.append(
                f"| {p} | {n} | {s['killed']} | {s['timeout']} | {s['survived']} | {s['not reached']} "
                f"| {s['equivalent']} | {pct} |"
            )
        lines += ["", "## Survivors and equivalent mutants", ""]
        for m in mutants:
            if m.outcome in ("survived", "not reached", "equivalent"):
                why = f": {m.reason}" if m.reason else ""
                lines.append(f"- {m.outcome}: `{m.key}`{why}")
    if planted:
        lines += [
            "",
            "## Named bugs, planted again",
            "",
            "| bug | file | caught | first failing test |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {p['bug']} | {p['path']} | {'yes' if p['caught'] else '**no**'} | {p['failed_test']} |" for p in planted
        ]
    (RESULTS / f"{args.report}.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--modules", nargs="*", default=CORE, help="source files to mutate (default: the core)")
    p.add_argument("--per-module", type=int, default=0, help="a seeded sample of this many mutants per module (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--planted", action="store_true", help="only the named bugs of PLANTED")
    p.add_argument("--list", action="store_true", help="list the mutants and stop")
    p.add_argument("--no-planted", action="store_true", help="skip the named bugs")
    p.add_argument(
        "--report",
        default="mutation",
        help="name of the report: benchmarks/results/NAME.json and NAME.md (default: mutation)",
    )
    p.add_argument(
        "--exclude",
        nargs="*",
        default=[],
        metavar="REPORT",
        help="leave out the mutants of these reports (a held-out sample: --exclude mutation)",
    )
    p.add_argument(
        "--again",
        action="store_true",
        help="rerun the mutants of the last report that were not killed (survived, not reached, "
        "equivalent) and update the report; the killed ones keep their result",
    )
    args = p.parse_args(argv)
    start = time.perf_counter()
    equivalent = json.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else {}
    survivors = json.loads(SURVIVORS.read_text()) if SURVIVORS.exists() else {}

    chosen: list[Mutant] = []
    rerun: set[str] | None = None
    history: list[str] = []
    spent = 0.0
    if args.again:
        last = json.loads((RESULTS / f"{args.report}.json").read_text())
        args.modules, args.seed, args.per_module = (
            list(dict.fromkeys(m["path"] for m in last["mutants"])),
            last["seed"],
            last["per_module"],
        )
        history, spent = last.get("history", [last["command"]]), last["seconds"]
        current = {m.key: m for path in args.modules for m in mutants_of(path)}
        rerun = set()
        for old in last["mutants"]:
            old.pop("key")
            if old["outcome"] in ("killed", "timeout"):
                chosen.append(Mutant(**old))
            elif f"{old['path']}:{old['line']}:{old['col']} {old['description']}" in current:
                m = current[f"{old['path']}:{old['line']}:{old['col']} {old['description']}"]
                chosen.append(m)
                rerun.add(m.key)
            else:
                raise SystemExit(
                    f"mutate: {old['path']}:{old['line']} {old['description']} is no longer a mutant "
                    "of the source (it changed): run the whole sample again"
                )
    exclude = set()
    for name in args.exclude:
        exclude |= {m["key"] for m in json.loads((RESULTS / f"{name}.json").read_text())["mutants"]}
    for path in [] if args.again else args.modules:
        found = [m for m in mutants_of(path) if m.key not in exclude]
        if args.per_module and len(found) > args.per_module:
            found = sorted(
                random.Random(f"{args.seed}:{path}").sample(found, args.per_module), key=lambda m: (m.line, m.col)
            )
        chosen += found
    if args.list:
        for m in chosen:
            print(m.key)
        print(f"{len(chosen)} mutants in {len(args.modules)} modules")
        return

    work = _scratch_copy()
    try:
        planted = [] if args.no_planted else run_planted(work)
        if args.planted:
            write_report([], planted, args, time.perf_counter() - start, history)
            return
        groups: dict[tuple[str, ...], list[str]] = {}
        for path in args.modules:
            groups.setdefault(tuple(tests_for(path)), []).append(path)
        for tests, modules in groups.items():
            lines, clean = covered_lines(work, list(tests), modules)
            timeout = 3 * clean + 30
            todo = [m for m in chosen if m.path in modules and (rerun is None or m.key in rerun)]
            print(f"{' '.join(tests)}: clean run {clean:.0f} s, {len(todo)} mutants", flush=True)
            for m in todo:
                if m.key in equivalent:
                    m.outcome, m.reason = "equivalent", equivalent[m.key]
                elif m.statement_line not in lines[m.path]:
                    m.outcome = "not reached"
                else:
                    run_mutant(work, m, list(tests), timeout)
                    if m.outcome == "survived":
                        m.reason = survivors.get(m.key, "")
                print(f"  {m.outcome:11s} {m.key}  {m.failed_test}", flush=True)
        write_report(chosen, planted, args, spent + time.perf_counter() - start, history)
        print(json.dumps(score(chosen)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
