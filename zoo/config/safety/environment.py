"""A config and the environment: it reads nothing from it, and sets only variables that cannot
load code or name a file.

Reads. A value that reads the environment (`${oc.env:SECRET}`) is resolved when the run starts
and written into config.yaml, hparams.yaml, summary.json, the trackers and every checkpoint. So
every string that OmegaConf would take for an interpolation (one holding `${`) is parsed with
OmegaConf's own grammar, exactly as OmegaConf parses it when it resolves the value, and every
resolver call in the parse tree is looked at, however it is spelled (`${ oc.env:X}`, `${oc.env
: X}`, inside another resolver's arguments or a quoted string):

- a resolver whose name is computed (`${${name}:X}`, `${oc.${part}:X}`) is refused: what it
  calls is known only when it runs;
- a resolver outside `RESOLVERS` is refused: `oc.env` (and OmegaConf 1's `env`) read the
  environment, and `oc.decode` / `oc.create` turn text into values when they run, so a text put
  together at run time could become a read;
- an escaped interpolation (`\\${oc.env:X}`) is a piece of text now, and a read as soon as the
  value is read back from config.yaml; its unescaped text is checked as well.

Sets. `hydra.job.env_set` puts variables into the job's environment before anything of the run
is imported. NCCL loads plugins (`NCCL_NET_PLUGIN`, `NCCL_TUNER_PLUGIN`, ...) and writes files
(`NCCL_DEBUG_FILE`, `NCCL_TOPO_DUMP_FILE`, ...) named by its variables; Python, CUDA and many
libraries do the same. So env_set takes an exact list of variables whose values are numbers or
words (`ENV_SET_ALLOWED`), each value one plain word or number."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from zoo.config.errors import ConfigError

# the resolvers a config may call: zoo's own (zoo.run.resolvers.register_resolvers), Hydra's, and
# OmegaConf's that select or list nodes of the config itself
RESOLVERS = frozenset(
    {
        "zoo.now",
        "zoo.rank_log",
        "zoo.rank_zero",
        "zoo.tasks_per_node",
        "zoo.gpus_per_node",
        "zoo.steps_for_tokens",
        "zoo.share_of_steps",
        "zoo.branch_end",
        "zoo.job_subdir",
        "hydra",
        "now",
        "oc.select",
        "oc.dict.keys",
        "oc.dict.values",
        "oc.deprecated",
    }
)
ENV_READERS = frozenset({"oc.env", "env"})

# environment variables a config may set for its job: thread counts, the devices, and the NCCL
# and torch.distributed settings that take a number or a word (none loads code or names a file)
ENV_SET_ALLOWED = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "TOKENIZERS_PARALLELISM",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NCCL_DEBUG",
    "NCCL_DEBUG_SUBSYS",
    "NCCL_SOCKET_IFNAME",
    "NCCL_SOCKET_NTHREADS",
    "NCCL_NSOCKS_PERTHREAD",
    "NCCL_IB_DISABLE",
    "NCCL_IB_HCA",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_TIMEOUT",
    "NCCL_IB_RETRY_CNT",
    "NCCL_P2P_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_SHM_DISABLE",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_CROSS_NIC",
    "NCCL_BUFFSIZE",
    "NCCL_NTHREADS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_NVLS_ENABLE",
    "NCCL_CUMEM_ENABLE",
    "NCCL_LAUNCH_MODE",
    "NCCL_ASYNC_ERROR_HANDLING",
    "NCCL_BLOCKING_WAIT",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "TORCH_NCCL_BLOCKING_WAIT",
    "TORCH_NCCL_ENABLE_MONITORING",
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
    "TORCH_NCCL_AVOID_RECORD_STREAMS",
)
# a value of one of them: a number or a word, or a comma list of them (devices, interfaces)
_PLAIN = re.compile(r"[A-Za-z0-9_.,:+-]*")


def check_env_set(env_set: Any) -> None:
    """ConfigError, on one line, for a variable of `hydra.job.env_set` outside ENV_SET_ALLOWED
    or a value that is not a plain number or word."""
    for name, value in (env_set or {}).items():
        if name not in ENV_SET_ALLOWED:
            raise ConfigError(
                f"hydra.job.env_set.{name} is refused: a config may set only variables that "
                f"take a number or a word ({', '.join(ENV_SET_ALLOWED)}); set others in the "
                f"environment zoo-train is started in"
            )
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or not _PLAIN.fullmatch(str(value)):
            raise ConfigError(f"hydra.job.env_set.{name}={value!r} is refused: its value must be a number or a word")


def check_env_reads(node: Any, path: str = "") -> None:
    """ConfigError, on one line, for the first string in `node` (a plain, unresolved container)
    whose interpolation reads the environment or could (`RESOLVERS`)."""
    if isinstance(node, dict):
        for key, value in node.items():
            check_env_reads(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            check_env_reads(value, f"{path}[{i}]")
    elif isinstance(node, str):
        check_value(node, path)


def check_value(text: str, path: str) -> None:
    """`check_env_reads` for one value: `text` as OmegaConf parses it, and its escaped
    interpolations once unescaped."""
    for name in resolvers_called(text):
        if name is None:
            raise ConfigError(
                f"{path}={text!r} is refused: it calls a resolver whose name is an "
                f"interpolation; name the resolver as written"
            )
        if name in ENV_READERS:
            raise ConfigError(
                f"{path}: a value read from the environment ({text}) is refused: it would be "
                f"written into config.yaml and every checkpoint; give the value itself"
            )
        if name not in RESOLVERS:
            raise ConfigError(
                f"{path}={text!r} is refused: a config may call only the resolvers "
                f"{', '.join(sorted(RESOLVERS))} (${{{name}:...}} is none of them)"
            )


def resolvers_called(text: str) -> Iterator[str | None]:
    """The name of every resolver `text` calls (None for one whose name is computed), in its
    parse tree and in that of its text with escaped interpolations unescaped; nothing for text
    OmegaConf does not read as an interpolation or cannot parse (it cannot call anything)."""
    from omegaconf.errors import GrammarParseError
    from omegaconf.grammar_parser import parse

    seen: set[str] = set()
    while "${" in text and text not in seen:
        seen.add(text)
        try:
            tree = parse(text)
        except GrammarParseError:
            tree = None
        if tree is not None:
            yield from _names(tree)
        text = text.replace("\\${", "${")  # an escaped interpolation, as a later read sees it


def _names(tree: Any) -> Iterator[str | None]:
    from antlr4.tree.Tree import TerminalNode
    from omegaconf.grammar.gen.OmegaConfGrammarParser import OmegaConfGrammarParser as Grammar

    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Grammar.InterpolationResolverContext):
            name = node.resolverName()
            parts = list(name.getChildren())
            if all(isinstance(p, TerminalNode) for p in parts):
                yield "".join(p.getText().strip() for p in parts)
            else:
                yield None
        if not isinstance(node, TerminalNode):
            stack.extend(node.getChildren())
