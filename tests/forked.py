"""A tool of zoo in a process forked from the test's own: a real process of its own (its own
pid, signals, exit status, SIGKILL ending it with nothing after), without the interpreter
start-up and the import of torch and Lightning (about 7 seconds of CPU on a 2-core machine),
which the test's process has done already. `zoo_train` (tests/cli/conftest.py) starts its runs
here, and so do the tests whose process exists to be killed or signalled and those that run
zoo-eval, zoo-generate, zoo-export or a refused zoo-train as a user does; a run's other ranks
are started by its launcher as new interpreters, and a test of what a fresh interpreter does
(imports, start-up time, the command line as the shell passes it) starts one instead.

Forking is safe here because the test process runs one compute thread, compiles without a pool
of workers (tests/conftest.py) and holds no CUDA context (`zoo_train` starts an interpreter
when it does); the child leaves through `os._exit`, so the parent's `atexit` handlers,
pytest's among them, never run in it."""

from __future__ import annotations

import importlib
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable


def _as_a_new_interpreter() -> None:
    """Drop the Hydra state a test before this one left in the test's process (a tool's main run
    here): a new interpreter has none, and Lightning's launcher reads it to build the command of
    the other ranks (as a Hydra app's, with hydra.* overrides zoo-eval would refuse)."""
    if "hydra.core.hydra_config" in sys.modules:
        from hydra.core.global_hydra import GlobalHydra
        from hydra.core.hydra_config import HydraConfig

        HydraConfig.instance().cfg = None
        GlobalHydra.instance().clear()


class Forked:
    """`zoo-TOOL ARGS...` run by its main() in a forked child, with the part of subprocess.Popen's
    interface the tests use: pid, poll, wait, send_signal, kill, communicate, returncode (negative
    for a signal, -9 for SIGKILL). The child runs in `cwd` with the environment `env` (both the
    test's when not given); `before` runs in it first (a fault to inject)."""

    def __init__(
        self,
        tool: str,
        *args: str,
        before: Callable[[], None] | None = None,
        cwd: str | os.PathLike | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.args = [f"zoo-{tool}", *args]
        self._cwd, self._env = cwd, env
        self.returncode: int | None = None
        self._module = f"zoo.cli.{tool}"
        main = importlib.import_module(self._module).main
        self._out, self._err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        sys.stdout.flush()
        sys.stderr.flush()
        self.pid = os.fork()
        if self.pid == 0:  # the child: its streams to the files, the tool, then out without cleanup
            self._child(main, before)

    def _child(self, main: Callable[[], None], before: Callable[[], None] | None) -> None:
        status = 1
        try:
            os.dup2(self._out.fileno(), 1)
            os.dup2(self._err.fileno(), 2)
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 (the child's whole life)
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            sys.argv = list(self.args)
            # the module a launcher restarts for its other ranks (Lightning's `python -m
            # __main__.__spec__.name ARGV[1:]`): the tool's, as `python -m zoo.cli.TOOL` gives it
            sys.modules["__main__"].__spec__ = importlib.util.find_spec(self._module)
            if self._cwd is not None:
                os.chdir(self._cwd)
            if self._env is not None:
                os.environ.clear()
                os.environ.update(self._env)
            _as_a_new_interpreter()
            if before is not None:
                before()
            try:
                main()
                status = 0
            except SystemExit as exc:
                status = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 (whatever it is, it goes to the child's stderr)
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)

    def poll(self) -> int | None:
        if self.returncode is None:
            done, code = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.returncode = -os.WTERMSIG(code) if os.WIFSIGNALED(code) else os.WEXITSTATUS(code)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.05)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """(stdout, stderr) once the child has ended; past `timeout` it is killed and
        subprocess.TimeoutExpired raised."""
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.wait()
            raise
        texts = []
        for handle in (self._out, self._err):
            handle.seek(0)
            texts.append(handle.read().decode(errors="replace"))
            handle.close()
        return texts[0], texts[1]


def fork_tool(
    tool: str,
    *args: str,
    before: Callable[[], None] | None = None,
    timeout: float = 300,
    cwd: str | os.PathLike | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """`zoo-TOOL ARGS...` in a forked child, waited for: a CompletedProcess as subprocess.run
    gives it (the status negative for a signal)."""
    child = Forked(tool, *args, before=before, cwd=cwd, env=env)
    out, err = child.communicate(timeout)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)
