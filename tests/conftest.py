"""Shared helpers: tiny model configs built from the registries, so a new family, position
scheme, norm or activation is tested automatically."""

from __future__ import annotations

import importlib
import logging
import os
import subprocess
from pathlib import Path

import pytest

# One compute thread a process: the suite runs a worker per core (pytest -n auto) and most tests
# start training processes, so more threads only contend for the same cores (measured on the
# 2-core machine: 13% less wall time for the train-CLI and resume tests). A value set outside wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Inductor compiles in the process that asks, not in a pool of workers: a test process forks its
# runs (tests/forked.py), and a fork must not inherit a pool's threads and pipes.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402

from zoo.config.facts.activations import ACTIVATION_FACTS
from zoo.config.facts.ffn import FFN_FACTS
from zoo.config.facts.norms import NORM_FACTS
from zoo.config.schema.model import Family, NormPlacement, PositionKind

FAMILIES = [f.value for f in Family]
POSITIONS = [p.value for p in PositionKind]
NORMS = [n.value for n in NormPlacement]
NORM_TYPES = [n.value for n in NORM_FACTS]  # the rows of zoo.config.facts.norms
ACTIVATIONS = [a.value for a in ACTIVATION_FACTS]  # the rows of zoo.config.facts.activations
FFNS = [f.value for f in FFN_FACTS]  # the rows of zoo.config.facts.ffn
CAUSAL_FAMILIES = [f.value for f in Family if f != Family.encoder_only]


def tiny(family: str = "decoder_only", position: str = "learned", **overrides) -> dict:
    """A model config small enough that a forward pass takes milliseconds."""
    cfg = dict(
        family=family,
        position={"kind": position},
        d_model=16,
        n_heads=2,
        n_layers=2,
        vocab_size=37,
        max_seq_len=32,
        dropout=0.0,
    )
    if family == "encoder_decoder":
        cfg["n_decoder_layers"] = 2
    cfg.update(overrides)
    return cfg


def sharp(family: str = "decoder_only", position: str = "learned", **overrides) -> dict:
    """`tiny` with weights drawn 25 x wider (init_std 0.5): its next-token distributions are
    peaked and far from ties, so a decoding bug that mixes up rows or positions changes an argmax
    (at the default init_std 0.02 the logits are nearly flat and such a bug can go unnoticed)."""
    return tiny(family, position, init_std=0.5, **overrides)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True, scope="session")
def _cache_dir(tmp_path_factory):
    """Keep tokenizer and dataset caches of the test session out of the user's home (CI may
    point ZOO_CACHE somewhere else; subprocesses inherit it)."""
    old = os.environ.get("ZOO_CACHE")
    if old is None:
        os.environ["ZOO_CACHE"] = str(tmp_path_factory.mktemp("zoo-cache"))
    yield os.environ["ZOO_CACHE"]
    if old is None:
        os.environ.pop("ZOO_CACHE", None)


def run_main(main, argv: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of a console script's `main()` run in this process with
    `argv` (no interpreter start-up: the modules are imported already)."""
    import sys

    monkeypatch.setattr(sys, "argv", argv)
    capsys.readouterr()
    try:
        main()
        status = 0
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def cli_here(capsys, monkeypatch):
    """`zoo-TOOL ARGS...` as the tool's main() in this process, returned as a CompletedProcess
    (exit status, stdout, stderr): the same outcome without an interpreter start-up, for
    refusals and short runs that need no process of their own. Environment variables a run
    sets for its ranks (ZOO_RUN_TIME, PL_GLOBAL_SEED) end with the call."""

    def run(tool: str, *args: str) -> subprocess.CompletedProcess:
        main = importlib.import_module(f"zoo.cli.{tool}").main
        saved, logs = dict(os.environ), _logging_state()
        try:
            status, out, err = run_main(main, [f"zoo-{tool}", *args], capsys, monkeypatch)
        finally:
            os.environ.clear()
            os.environ.update(saved)
            _restore_logging(logs)  # Hydra's handlers write to this test's captured streams
        return subprocess.CompletedProcess([f"zoo-{tool}", *args], status, out, err)

    return run


def _logging_state() -> dict:
    """Every logger's handlers, level, disabled and propagate flags (root's under "")."""
    loggers = {"": logging.getLogger()}
    loggers.update(
        {name: lg for name, lg in logging.Logger.manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    )
    return {name: (lg, list(lg.handlers), lg.level, lg.disabled, lg.propagate) for name, lg in loggers.items()}


def _restore_logging(state: dict) -> None:
    for lg, handlers, level, disabled, propagate in state.values():
        lg.handlers[:] = handlers
        lg.level, lg.disabled, lg.propagate = level, disabled, propagate
    for name, lg in list(logging.Logger.manager.loggerDict.items()):  # loggers the call created
        if name not in state and isinstance(lg, logging.Logger):
            lg.handlers.clear()


_CHECKOUT = Path(__file__).resolve().parent.parent
# what importing and testing Python writes anywhere, and the caches CI points into the checkout
_HARMLESS = ("__pycache__", ".pytest_cache", ".hypothesis", ".coverage", ".zoo-cache")


def _checkout_changes() -> set[str] | None:
    """`git status` of the checkout the tests run from (None outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--ignored"], cwd=_CHECKOUT, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return {line for line in out.stdout.splitlines() if not any(part in line for part in _HARMLESS)}


def pytest_sessionstart(session):
    session.config._zoo_checkout_before = _checkout_changes()


def pytest_sessionfinish(session, exitstatus):
    """A test writes into its own temporary directories only: a file it leaves in the checkout
    (a tracker's default ./mlruns, a run under ./runs) fails the session, named."""
    before = getattr(session.config, "_zoo_checkout_before", None)
    after = _checkout_changes()
    if before is None or after is None:
        return
    left = sorted(after - before)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = ["the tests left these in the checkout (git status):", *left]
        if reporter is not None:
            reporter.write_line("\n".join(lines), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects
def pytest_collection_modifyitems(config, items):
    """The tests tests/slow_by_cost.txt lists (over the fast tier's time budget when last
    measured, tests/cost_tier.py) are `slow`."""
    from tests.cost_tier import entries, listed

    ids = entries()
    for item in items:
        if listed(item.nodeid, ids):
            item.add_marker(pytest.mark.slow)
