"""The task shapes, in one torch-free table: for each training objective, the model families it
trains, the data columns it reads, the special tokens it needs, and how its examples become
batches (packed windows or padded rows, shifted labels or not, which tokenizing step and which
collate function).

The data module (`zoo.data.datamodule`), the special-token check (`zoo.data.specials`), the
task registry (`zoo.tasks.TASKS`), config validation, zoo-prepare, zoo-generate, zoo-eval,
zoo-compare's length table, the run summary and zoo-bench read these rows instead of
restating them; `tests/config/facts/test_task_table.py` keeps the table, the task classes and the
YAML files under conf/ in step. The tokenizing step and the collate function are named here by
enum, so this module imports no torch; `zoo.data` dispatches on the names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zoo.config.choice import Choice, listed
from zoo.config.facts.families import Family


class TaskKind(Choice):
    """The training objective (`task.kind`); each has one row of `TASK_SPECS` and one task
    class in `zoo.tasks.TASKS`."""

    causal_lm = "causal_lm"  # next-token prediction on packed windows (Radford et al. 2018)
    masked_lm = "masked_lm"  # BERT masking on packed windows (Devlin et al. 2019)
    seq2seq = "seq2seq"  # padded source / target pairs, teacher forcing
    classification = "classification"  # [CLS] + text, one label per example


class Tokenize(Choice):
    """How a task's text columns become id columns (`zoo.data.tokenize`, `zoo.data.prepared`)."""

    documents = "documents"  # each document's ids then eos, concatenated into one stream
    pairs = "pairs"  # source[:seq_len-1] + eos, and target[:seq_len-1] (the collate adds bos / eos)
    labelled = "labelled"  # [cls] + text[:seq_len-1], and the label's class id


class Collate(Choice):
    """Which collate function turns a list of examples into a batch (`zoo.data.collate`)."""

    causal = "causal"  # windows of T+1 ids -> input_ids, labels shifted by one
    masked = "masked"  # windows of T ids -> BERT-masked input_ids, labels at the chosen positions
    seq2seq = "seq2seq"  # padded pairs -> decoder input [bos] + y, labels y + [eos]
    classification = "classification"  # padded texts -> one label per row


@dataclass(frozen=True)
class Special:
    """A special token a task needs (`name`, a key of `Tokenizer.special_ids()`) and what for
    (`why`, the clause of the refusal when a tokenizer lacks it)."""

    name: str
    why: str


@dataclass(frozen=True, kw_only=True)
class TaskSpec:
    """One task kind's row.

    - `families`: the model families that can train it; `model.family` outside them is refused.
    - `default_for`: the families whose default task it is (the `/task` default of their
      conf/model/*.yaml; zoo-bench times a family on it); every family is in exactly one row's.
    - `columns`: the `DataConfig` fields naming the columns it reads; each must be a column of
      both splits.
    - `text_columns`: of those, the ones holding text (tokenized, and what a tokenizer trained
      for the run learns from); the rest are labels.
    - `specials`: the special tokens it needs, each with the reason.
    - `packs`: documents are concatenated and cut into fixed windows (prepared token shards, or
      a stream); otherwise one padded example per row.
    - `shifted`: the labels are the (decoder) inputs shifted by one, position t predicting
      token t+1; a packed window then holds one token more than `data.seq_len`.
    - `generates`: a trained model writes text (zoo-generate): a causal LM continues a prompt,
      an encoder-decoder decodes a target; only a shifted task can.
    - `decodes_in_validation`: validation decodes greedy outputs of up to
      `task.generate_max_tokens` tokens (seq2seq scores BLEU), so a bounded position scheme must
      hold them; only a task that generates can.
    - `tokenize`, `collate`: how the text becomes ids, and the ids a batch.
    - `batch`: the keys of the batch the collate function returns.
    """

    kind: TaskKind
    families: tuple[Family, ...]
    default_for: tuple[Family, ...]
    columns: tuple[str, ...]
    text_columns: tuple[str, ...]
    specials: tuple[Special, ...]
    packs: bool
    shifted: bool
    generates: bool
    decodes_in_validation: bool
    tokenize: Tokenize
    collate: Collate
    batch: tuple[str, ...]

    def __post_init__(self) -> None:
        if not set(self.default_for) <= set(self.families):
            raise ValueError(f"task {self.kind.value}: default_for must be among its families")
        if not set(self.text_columns) <= set(self.columns):
            raise ValueError(f"task {self.kind.value}: text_columns must be among its columns")
        if self.packs != (self.tokenize == Tokenize.documents):
            raise ValueError(f"task {self.kind.value}: exactly the packing tasks tokenize documents")
        if self.generates and not self.shifted:
            raise ValueError(f"task {self.kind.value}: only a task that predicts the next token generates")
        if self.decodes_in_validation and not self.generates:
            raise ValueError(f"task {self.kind.value}: only a task that generates decodes in validation")

    def window(self, seq_len: int) -> int:
        """Tokens of one packed window for `data.seq_len`: one more when the labels are shifted
        (the last position's target)."""
        if not self.packs:
            raise ValueError(f"task {self.kind.value} pads examples; it has no windows")
        return seq_len + 1 if self.shifted else seq_len


_EOS_ENDS_DOCUMENTS = Special("eos", "it ends each document in the packed blocks")
_PAD_FILLS = Special("pad", "it fills the batches")


def _packed_lm(
    kind: TaskKind, family: Family, specials: tuple[Special, ...], *, shifted: bool, generates: bool, collate: Collate
) -> TaskSpec:
    """The row of a language-model objective over packed windows of one text column, the
    default task of its one family."""
    return TaskSpec(
        kind=kind,
        families=(family,),
        default_for=(family,),
        columns=("text_column",),
        text_columns=("text_column",),
        specials=specials,
        packs=True,
        shifted=shifted,
        generates=generates,
        decodes_in_validation=False,
        tokenize=Tokenize.documents,
        collate=collate,
        batch=("input_ids", "labels"),
    )


TASK_SPECS: dict[TaskKind, TaskSpec] = {
    TaskKind.causal_lm: _packed_lm(
        TaskKind.causal_lm,
        Family.decoder_only,
        (_EOS_ENDS_DOCUMENTS,),
        shifted=True,
        generates=True,
        collate=Collate.causal,
    ),
    TaskKind.masked_lm: _packed_lm(
        TaskKind.masked_lm,
        Family.encoder_only,
        (Special("mask", "it replaces the tokens to predict"), _EOS_ENDS_DOCUMENTS),
        shifted=False,
        generates=False,
        collate=Collate.masked,
    ),
    TaskKind.seq2seq: TaskSpec(
        kind=TaskKind.seq2seq,
        families=(Family.encoder_decoder,),
        default_for=(Family.encoder_decoder,),
        columns=("text_column", "target_column"),
        text_columns=("text_column", "target_column"),
        specials=(
            Special("bos", "the decoder starts from it"),
            Special("eos", "it ends every source and target"),
            _PAD_FILLS,
        ),
        packs=False,
        shifted=True,
        generates=True,
        decodes_in_validation=True,
        tokenize=Tokenize.pairs,
        collate=Collate.seq2seq,
        batch=("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask", "labels"),
    ),
    TaskKind.classification: TaskSpec(
        kind=TaskKind.classification,
        families=(Family.encoder_only, Family.decoder_only),
        default_for=(),
        columns=("text_column", "label_column"),
        text_columns=("text_column",),
        specials=(Special("cls", "it starts every example and is pooled"), _PAD_FILLS),
        packs=False,
        shifted=False,
        generates=False,
        decodes_in_validation=False,
        tokenize=Tokenize.labelled,
        collate=Collate.classification,
        batch=("input_ids", "attention_mask", "labels"),
    ),
}


def task_spec(kind: TaskKind | str, key: str = "task") -> TaskSpec:
    """The row of `kind` (a TaskKind or its name); ConfigError naming `key` for another name."""
    return TASK_SPECS[TaskKind.parse(kind, key)]


def kinds_that(flag: str) -> list[str]:
    """The task kinds whose row sets `flag` (`packs`, `shifted`, `generates`,
    `decodes_in_validation`), in TaskKind's order."""
    return [kind.value for kind, spec in TASK_SPECS.items() if getattr(spec, flag)]


def families_of(kind: TaskKind | str) -> tuple[Family, ...]:
    """The model families that can train `kind`."""
    return task_spec(kind).families


def task_of_family(family: Family | str) -> TaskKind:
    """The default task of a model family (what its conf/model/*.yaml composes, and what
    zoo-bench times)."""
    family = Family.parse(family, "model.family")
    found = [spec.kind for spec in TASK_SPECS.values() if family in spec.default_for]
    if len(found) != 1:  # the table is wrong, not the config (tests/config/facts/test_task_table.py)
        raise LookupError(f"model.family={family.value} is the default of {len(found)} rows of TASK_SPECS, not one")
    return found[0]


def task_names(where: Callable[[TaskSpec], bool], conjunction: str = "or") -> str:
    """The tasks whose row `where` holds for, as prose ("causal_lm or seq2seq" for the ones that
    generate): how help and refusals name a set of tasks."""
    return listed((spec.kind.value for spec in TASK_SPECS.values() if where(spec)), conjunction)
