"""The documentation holds together: the MkDocs site builds in strict mode (a page left out of the
nav, a broken link or anchor fails), every relative link of README.md, docs/ and the packages'
README.md checklists resolves to a file and, with an anchor, to a heading, the README keeps the
Quickstart CI runs, and every command of the getting-started page's first session runs."""

from __future__ import annotations

import logging
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
LINKED = [README, *sorted(DOCS.glob("*.md")), *sorted((ROOT / "zoo").rglob("README.md"))]

INSTALL = "pip install torch==2.13.0 . && zoo-train"
TEST = "pip install torch==2.13.0 '.[test]' && pytest -n auto"


def code_blocks(text: str, lang: str | None = None) -> list[str]:
    """The fenced code blocks of a Markdown text (of one language, if given)."""
    blocks = re.findall(r"^```([\w-]*)\n(.*?)^```", text, flags=re.M | re.S)
    return [body for tag, body in blocks if lang is None or tag == lang]


def prose(text: str) -> str:
    """The text without fenced code blocks and code spans (links inside them are examples)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def headings(path: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
    return [m.group(1).strip() for m in re.finditer(r"^#{1,6} +(.+?) *#*$", text, flags=re.M)]


def plain(heading: str) -> str:
    """A heading's text as rendered: links reduced to their text, code and emphasis marks gone."""
    heading = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[`*]", "", heading)


def github_slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", plain(heading).strip().lower()).replace(" ", "-")


def site_slug(heading: str) -> str:
    """MkDocs' anchor of a heading (Python-Markdown's toc extension)."""
    from markdown.extensions.toc import slugify

    return slugify(plain(heading), "-")


def links(path: Path) -> list[str]:
    return re.findall(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", prose(path.read_text()))


def test_the_site_builds_in_strict_mode(tmp_path):
    """`mkdocs build --strict`: any warning (a page not in the nav, a link to a missing page or
    anchor, an absolute link) aborts the build."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    warnings: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            warnings.append(record.getMessage())

    handler = Collect(level=logging.WARNING)
    logging.getLogger("mkdocs").addHandler(handler)
    try:
        build(load_config(str(ROOT / "mkdocs.yml"), strict=True, site_dir=str(tmp_path / "site")))
    finally:
        logging.getLogger("mkdocs").removeHandler(handler)
    assert not warnings, warnings
    assert (tmp_path / "site" / "composing" / "index.html").is_file()


def test_every_page_is_in_the_site():
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    pages = {page for entry in nav for page in entry.values()}
    assert pages == {p.name for p in DOCS.glob("*.md")}


@pytest.mark.parametrize("path", LINKED, ids=[str(p.relative_to(ROOT)) for p in LINKED])
def test_every_relative_link_resolves(path):
    """A link to a file of the repository names one that exists; an anchor names a heading of its
    target. An anchor into docs/ must be the same on GitHub and on the MkDocs site."""
    broken = []
    for link in links(path):
        if re.match(r"[a-z]+:", link):
            continue
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        if not file.exists():
            broken.append(f"{link}: no such file")
            continue
        if not anchor:
            continue
        if file.suffix != ".md":
            broken.append(f"{link}: an anchor into a file that is not Markdown")
            continue
        in_site = file.parent == DOCS
        found = [h for h in headings(file) if github_slug(h) == anchor and (not in_site or site_slug(h) == anchor)]
        if not found:
            broken.append(
                f"{link}: no heading of {file.relative_to(ROOT)} has the anchor #{anchor}"
                + (" on both GitHub and the site" if in_site else "")
            )
    assert not broken, f"{path.relative_to(ROOT)}: {broken}"


def test_a_docs_page_links_only_inside_the_site():
    """MkDocs cannot link out of docs/: repository paths in the pages are code spans instead."""
    outward = [
        f"{p.name}: {link}"
        for p in DOCS.glob("*.md")
        for link in links(p)
        if not re.match(r"[a-z]+:", link)
        and link.partition("#")[0]
        and (p.parent / link.partition("#")[0]).resolve().parent != DOCS
    ]
    assert not outward, outward


def test_the_readme_shows_the_quickstart_that_ci_runs():
    readme = README.read_text()
    commands = [line for block in code_blocks(readme, "bash") for line in block.splitlines()]
    assert INSTALL in commands and TEST in commands
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip()]
    assert ci[-1] == TEST, "CI runs the README's test command verbatim"


CPU_WHEEL = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"


def _pip_installs(text: str) -> list[str]:
    """Every `pip install ...` a text writes, up to the end of its code span, quote or line."""
    return re.findall(r"pip install [^`\n\"]*", text)


def test_every_install_line_installs_what_an_index_serves():
    """zoo is installed from its checkout (`pip install .`, an extra as `'.[eval]'`): an install
    line naming `zoo` or `'zoo[eval]'` asks the package index for a package it does not serve;
    and the CPU wheel the Quickstart advises is a command, with the index that holds it."""
    sources = [*LINKED, *sorted((ROOT / "zoo").rglob("*.py")), ROOT / "pyproject.toml"]
    wrong = [
        f"{path.relative_to(ROOT)}: {line}"
        for path in sources
        for line in _pip_installs(path.read_text())
        if any(re.fullmatch(r"'?zoo(\[[\w,]+\])?'?", word) for word in line.split()[2:])
    ]
    assert not wrong, wrong
    for page in (README, DOCS / "index.md"):
        text = page.read_text()
        assert "CPU wheel" in text and CPU_WHEEL in text, f"{page.name} advises the CPU wheel without its command"


def test_the_readme_stays_a_front_door():
    size = len(README.read_bytes())
    assert size <= 15 * 1024, f"README.md is {size} bytes: the rest belongs in docs/"


def test_the_layer_order_is_the_one_the_layer_test_checks():
    (order,) = re.findall(r"^\s+(config < .+)$", (ROOT / "tests" / "test_layers.py").read_text(), flags=re.M)
    assert order.strip() in (DOCS / "extending.md").read_text()
    assert order.strip() in README.read_text()


def first_session() -> list[str]:
    """The commands of docs/index.md's bash blocks, but the installs (CI runs those)."""
    text = (DOCS / "index.md").read_text()
    lines = [line.strip() for block in code_blocks(text, "bash") for line in block.replace("\\\n", " ").splitlines()]
    return [line for line in lines if line and not line.startswith(("#", "pip install"))]


def test_the_first_session_is_short_commands_of_zoo():
    commands = first_session()
    assert len(commands) >= 5
    assert all(shlex.split(c)[0].startswith("zoo") for c in commands), commands


@pytest.mark.slow
def test_every_command_of_the_first_session_runs(tmp_path):
    """In an empty directory, in the page's order, each command exits 0 and leaves what the page
    says it does."""
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        # an editable install's Hydra finds the recipes (-cn quick) through the checkout
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    for command in first_session():
        done = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert (tmp_path / "runs" / "first" / "summary.json").is_file()
    assert (tmp_path / "multirun" / "first" / "compare" / "report.md").is_file()
