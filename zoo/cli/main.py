"""`zoo`: every tool under one command. `zoo SUBCOMMAND [ARGS ...]` runs what
`zoo-SUBCOMMAND [ARGS ...]` runs (the same main function, the same arguments).

    zoo train model=llama trainer.max_steps=100
    zoo generate ckpt=runs/.../checkpoints/last.ckpt prompt="And God said"
    zoo SUBCOMMAND --help
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import sys

from zoo.cli.tool import HELP_FLAGS, fail, wrap

TOOL = "zoo"
# subcommand -> "module:function" of its console script (zoo-SUBCOMMAND in pyproject.toml)
COMMANDS: dict[str, str] = {
    "train": "zoo.cli.train:main",
    "generate": "zoo.cli.generate:main",
    "eval": "zoo.cli.eval:main",
    "export": "zoo.cli.export:main",
    "compare": "zoo.cli.compare:main",
    "bench": "zoo.cli.bench:main",
    "plan": "zoo.cli.plan:main",
    "prepare": "zoo.cli.prepare:main",
}


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        fail(TOOL, f"give a subcommand: {', '.join(COMMANDS)}; {TOOL} --help describes them")
    if argv[0] in HELP_FLAGS:
        print(usage())
        return
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        close = difflib.get_close_matches(name, COMMANDS, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        fail(TOOL, f"unknown subcommand {name!r}; {hint}subcommands: {', '.join(COMMANDS)}")
    module, function = COMMANDS[name].split(":")
    getattr(importlib.import_module(module), function)(rest)  # each tool's main takes its arguments


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"usage: {TOOL} SUBCOMMAND [ARGS ...]", "", __doc__.strip(), "", "subcommands:"]
    for name, target in COMMANDS.items():
        lines += wrap(summary(target.split(":")[0]), first=f"  {name:<{width}}  ", indent=" " * (width + 4))
    return "\n".join(lines)


def summary(module: str) -> str:
    """The first clause of a module's docstring, read from its source (nothing is imported,
    so `zoo --help` loads neither torch nor Hydra)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"no source for {module}")
    with open(spec.origin, encoding="utf-8") as fh:
        doc = ast.get_docstring(ast.parse(fh.read())) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    first = first.split(": ", 1)[1] if first.startswith("`zoo-") and ": " in first else first
    for end in (". ", "; "):
        first = first.split(end)[0]
    return first.rstrip(".")


if __name__ == "__main__":
    main()
