"""The tables a study's own scripts write beside its report (signals.md, routing.md, coord.md):
made again from the report's rebuilt tables and compared with the committed ones line by line,
each differing line named by its file, its number and the two values that differ.

A script takes part by declaring what it writes, at module level:

    GENERATES = ("signals.md",)   # the files `generate` returns, by name
    MEASURED = {"trajectories.csv": "how it was measured, as a command"}   # its inputs no table rebuilds
    def generate(directory: Path) -> dict[str, str]: ...   # name -> text, from the tables in directory

`recompute=DIR` imports each such script of DIR (it runs the study's own code, as running the
script would), gives it a scratch directory holding the rebuilt report's tables and DIR's
`MEASURED` files, and compares what it returns with DIR's files. Every other .md and .csv of DIR
gets a line saying what it is: a report table, a measured input (not rebuilt: the command that
measures it again), or a file no script declares (not checked). Nothing is passed over unsaid."""

from __future__ import annotations

import difflib
import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType

from zoo.compare.committed_lengths import LENGTHS_CSV
from zoo.compare.errors import CompareError
from zoo.config.records.reader import REPORT_REMEDY, TABLE_BYTES, read_bytes, read_text

# zoo-compare's own files of a report, compared table by table in recompute
REPORT_FILES = ("report.md", "report.csv", "runs.csv", "heldout.csv", "pairs.csv", LENGTHS_CSV)
DECLARES = re.compile(r"^GENERATES\s*=", re.M)
# a number as the tables print it: sign (ASCII or U+2212), digits with thousands commas (not in a
# .csv, where a comma ends a cell), decimals, exponent
NUMBER = re.compile(r"[-+\u2212]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
CELL_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
SHOWN = 12  # differing lines shown per file; the rest counted


def _number_pair(given: str, rebuilt: str, number: re.Pattern[str]) -> tuple[str, str] | None:
    """The first (given, rebuilt) numbers that differ where the two lines differ in numbers
    alone; None where their words differ too."""
    if number.split(given) != number.split(rebuilt):
        return None
    for a, b in zip(number.findall(given), number.findall(rebuilt)):
        if a != b:
            return a, b
    return None


def differing_lines(name: str, given: str, rebuilt: str) -> tuple[list[str], int]:
    """Lines naming each line of `given` (the committed text of `name`) that differs from
    `rebuilt`: the two numbers where only numbers differ, else the two lines; and how many differ."""
    a, b = given.splitlines(), rebuilt.splitlines()
    number = CELL_NUMBER if name.endswith(".csv") else NUMBER
    lines: list[str] = []
    differ = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            differ += 1
            if differ > SHOWN:
                continue
            mine = a[i1 + k] if i1 + k < i2 else None
            again = b[j1 + k] if j1 + k < j2 else None
            pair = _number_pair(mine, again, number) if mine is not None and again is not None else None
            if pair is None:
                pair = (
                    repr(mine[:160]) if mine is not None else "no line",
                    repr(again[:160]) if again is not None else "no line",
                )
            lines.append(f"{name} line {i1 + k + 1}: report {pair[0]}, rebuilt {pair[1]}: DIFFERS")
    if differ > SHOWN:
        lines.append(f"{name}: {differ - SHOWN} more line(s) differ")
    if not differ:
        lines.append(f"{name}: every line equals the rebuilt one: equal")
    return lines, differ


def declaring_scripts(directory: Path) -> list[Path]:
    """The .py files of `directory` that declare the tables they write (`GENERATES`)."""
    found = []
    for path in sorted(directory.glob("*.py")):
        if path.is_file() and not path.is_symlink():
            text = read_bytes(path, root=directory, limit=TABLE_BYTES, remedy=REPORT_REMEDY)
            if DECLARES.search(text.decode("utf-8", "replace")):
                found.append(path)
    return found


def _load(script: Path) -> ModuleType:
    name = f"_zoo_study_{script.parent.name}_{script.stem}"
    spec = importlib.util.spec_from_file_location(name, script)
    if spec is None or spec.loader is None:
        raise CompareError(f"{script}: cannot be imported as a study script")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the study's own code: whatever it raises is one line
        raise CompareError(f"{script}: importing it failed ({type(exc).__name__}: {exc})") from None
    finally:
        sys.modules.pop(name, None)
    for attribute in ("GENERATES", "generate"):
        if not hasattr(module, attribute):
            raise CompareError(f"{script}: declares GENERATES but has no {attribute}")
    return module


def compare_scripts(directory: Path, scratch: Path) -> tuple[list[str], int]:
    """Each declaring script of `directory` run on `scratch` (the rebuilt report's tables, with
    the script's MEASURED inputs copied from `directory`), its output compared with the
    committed files; then a line for every other .md/.csv of `directory`."""
    lines: list[str] = []
    differ = 0
    generated: set[str] = set()
    measured: dict[str, str] = {}
    for script in declaring_scripts(directory):
        module = _load(script)
        inputs = dict(getattr(module, "MEASURED", {}))
        measured.update(inputs)
        for name in inputs:
            if not (scratch / name).exists() and os.path.lexists(directory / name):  # read as any table of DIR
                (scratch / name).write_bytes(
                    read_bytes(directory / name, root=directory, limit=TABLE_BYTES, remedy=REPORT_REMEDY)
                )
        try:
            made = module.generate(scratch)
        except Exception as exc:  # the study's own code, on tables that may not hold what it reads
            why = f"{type(exc).__name__}: {exc}".replace(str(scratch), "the rebuilt report")
            lines += [
                f"{n}: {script.name} cannot make it from the rebuilt tables ({why}): DIFFERS" for n in module.GENERATES
            ]
            differ += len(module.GENERATES)
            generated.update(module.GENERATES)
            continue
        if sorted(made) != sorted(module.GENERATES):
            raise CompareError(f"{script}: generate made {sorted(made)}, GENERATES declares {list(module.GENERATES)}")
        for name in module.GENERATES:
            generated.add(name)
            if not os.path.lexists(directory / name):
                lines.append(f"{name}: {script.name} makes it, the report has none: DIFFERS")
                differ += 1
                continue
            given = read_text(directory / name, root=directory, remedy=REPORT_REMEDY)
            more, n = differing_lines(name, given, made[name])
            lines += more if n else [f"{name}: every line equals the one {script.name} makes again: equal"]
            differ += n
    for path in sorted(p for p in directory.iterdir() if p.suffix in (".md", ".csv")):
        if path.name in REPORT_FILES or path.name in generated:
            continue
        if path.name in measured:
            lines.append(f"{path.name}: measured, not rebuilt from a table ({measured[path.name]})")
        elif path.name == "README.md":
            lines.append("README.md: prose; its numbers are held to these tables by the test suite")
        else:
            lines.append(f"{path.name}: no script here declares it: not checked")
    for sub in sorted(p for p in directory.iterdir() if p.is_dir() and (p / "report.md").is_file()):
        has_runs = (sub / "runs.csv").is_file()
        lines.append(
            f"{sub.name}/: a report of its own: "
            + (f"recompute={sub}" if has_runs else "written before runs.csv, cannot be rebuilt")
        )
    return lines, differ
