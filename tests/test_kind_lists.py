"""No hand-written list of an axis's kinds in zoo's code: a help string, a refusal or a tuple
that names two or more kinds of one axis (`zoo.config.facts.axes.AXES`) goes stale when a kind
is added, so every such list is built from the axis's enum or rows (`zoo.config.choice.Choice.
listed`, `zoo.config.facts.*`). The scan reads every string literal (docstrings aside: they
explain) and every tuple, list or set of string literals under zoo/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from zoo.config.facts.axes import AXES

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "zoo").rglob("*.py"))
# one kind, then one or more kinds of the same axis after a list's separators ("a, b or c",
# "a or b", "a/b", "(a, b)")
SEPARATOR = r"(?:\s*,\s*(?:or\s+|and\s+)?|\s+or\s+|\s+and\s+|\s*/\s*)"


def listing(values: set[str]) -> re.Pattern[str]:
    kind = "|".join(sorted((re.escape(v) for v in values), key=len, reverse=True))
    return re.compile(rf"(?<![\w.=-])(?:{kind}){SEPARATOR}(?:{kind})(?![\w(-])")


LISTINGS = {a.key: listing({k.value for k in a.kinds}) for a in AXES if len(a.kinds) > 1}
# a string naming three or more kinds of one axis as words is a list too, however they are
# separated ("pre (...), post (...) or sandwich (...)")
KIND_WORD = re.compile(r"(?<![\w.=-])[a-z0-9_]+(?![\w(-])")
# a row's own prose, which may say how it composes with each kind of another axis (a block
# row's formula under each norm placement): the row is where that belongs
ROW_PROSE = {"what", "paper", "placements", "parameters", "flops"}


def _docstrings(tree: ast.AST) -> set[int]:
    """Docstrings, and the prose arguments of a row (`ROW_PROSE`)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ROW_PROSE:
            found.update(id(n) for n in ast.walk(node.value) if isinstance(n, ast.Constant))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def hand_written_lists(source: str, where: str) -> list[str]:
    """'where:line: axis key: the list' for each hand-written list of one axis's kinds."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            for key, pattern in LISTINGS.items():
                found += [f"{where}:{node.lineno}: {key}: {m.group(0)!r}" for m in pattern.finditer(node.value)]
            words = set(KIND_WORD.findall(node.value))
            for a in AXES:
                named = words & {k.value for k in a.kinds}
                if len(named) >= 3:
                    found.append(f"{where}:{node.lineno}: {a.key}: {sorted(named)}")
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            strings = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            for a in AXES:
                named = strings & {k.value for k in a.kinds}
                if len(named) >= 2:
                    found.append(f"{where}:{node.lineno}: {a.key}: {sorted(named)}")
    return found


def test_no_source_lists_an_axis_kinds_by_hand():
    found = [hit for path in SOURCES for hit in hand_written_lists(path.read_text(), path.relative_to(ROOT).as_posix())]
    assert found == [], "build these from the axis's enum or rows:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "planted",
    [
        'HELP = "adamw, adam, or muon"',
        'x = {"help": "the QK-norm type (layernorm or rmsnorm)"}',
        'KINDS = ("cosine", "wsd")',
        'raise ValueError(f"use model.norm=pre, sandwich or reordered, not {x}")',
        'HELP = "pre (x + f(n(x))), post (n(x + f(x))) and sandwich (Gemma 2)"',
    ],
)
def test_a_planted_hand_written_list_is_caught(planted):
    assert hand_written_lists(planted, "planted.py")


@pytest.mark.parametrize(
    "fine",
    [
        '"""a docstring may explain adamw, adam or muon"""',
        'HELP = f"optimizer: {listed}"',
        'x = "linear warmup, then a cosine from optim.lr"',
        'y = "model.block=parallel (one norm of the sum)"',
        'ROW = BlockFacts(placements="pre: x + f(n(x)); post: n(x + f(x)); sandwich: refused")',
    ],
)
def test_prose_that_names_one_kind_at_a_time_passes(fine):
    assert hand_written_lists(fine, "fine.py") == []
