"""Typed schemas of the data pipeline: where the text comes from (`DataConfig`) and how it
becomes token ids (`TokenizerConfig`).

Hydra composes these under `data:` and `tokenizer:` (conf/data/*.yaml, conf/tokenizer/*.yaml);
`as_data_config` / `as_tokenizer_config` turn a composed node, a dict or a dataclass into a
validated object. Every check raises `ConfigError` with a one-line message naming the key, the
value and what is allowed. Nothing here imports torch or datasets.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from zoo.config.choice import Choice
from zoo.config.errors import ConfigError
from zoo.config.facts.corpora import CORPORA_BY_NAME, EXTERNAL, source_help
from zoo.config.facts.ramps import BatchWarmupLR, check_ramps, parse_points
from zoo.config.facts.tasks import Collate, TaskKind, task_names, task_spec
from zoo.config.facts.tokenizers import SENTENCEPIECE_PARAMS, TokenizerKind, tokenizer_readers  # noqa: F401  (TokenizerKind re-exported)
from zoo.config.schema.convert import as_schema, plain
from zoo.config.schema.frozen import settle
from zoo.config.schema.recall import RECALL_KEYS, RecallLoss, check_recall_data

# Where the examples come from: a built-in offline corpus (a row of
# zoo.config.facts.corpora.CORPUS_ROWS), the user's files (local: data.path; .txt, .jsonl/.json,
# .csv/.tsv, .parquet) or the Hub (hub: data.hub_name, passed to datasets.load_dataset).
if TYPE_CHECKING:

    class DataSource(Choice):  # the type checker's view of the enum below: the members code names
        kjv = "kjv"
        local = "local"
        hub = "hub"


# the enum, made from the table at import (the class above is only its type: mypy reads no
# functional Enum call whose names are computed)
DataSource = Choice("DataSource", [(name, name) for name in (*CORPORA_BY_NAME, *EXTERNAL)])  # type: ignore[misc, call-overload]


class SampleBy(Choice):
    """How a .txt file is cut into examples (datasets' `text` builder)."""

    line = "line"
    paragraph = "paragraph"
    document = "document"


# the kinds that read SentencePiece's parameters (their rows: zoo.config.facts.tokenizers);
# setting one away from its default for another kind is refused, so `tokenizer=byte
# tokenizer.vocab_size=512` does not silently do nothing.
SENTENCEPIECE_KINDS = tokenizer_readers("vocab_size")
_SENTENCEPIECE_PARAMS = SENTENCEPIECE_PARAMS


@dataclass(kw_only=True, frozen=True)
class TokenizerConfig:
    """How text becomes ids. zoo's own kinds share the same special ids: pad 0, unk 1, bos 2,
    eos 3, mask 4, cls 5; kind hf keeps the ids of the Hugging Face tokenizer at `path`."""

    kind: TokenizerKind = field(default=TokenizerKind.sentencepiece_bpe, metadata={"help": "tokenizer family"})
    vocab_size: int = field(
        default=8192,
        metadata={
            "help": "sentencepiece: target vocabulary incl. specials; a small training "
            "text may yield fewer pieces (soft limit)"
        },
    )
    character_coverage: float = field(
        default=1.0,
        metadata={"help": "sentencepiece: share of characters kept as pieces; the rest -> unk"},
    )
    byte_fallback: bool = field(
        default=False,
        metadata={
            "help": "sentencepiece: spell unseen characters as UTF-8 byte pieces (needs vocab_size > 256 + characters)"
        },
    )
    max_sentences: int = field(
        default=1_000_000,
        metadata={"help": "sentencepiece: lines sampled from the training text to train on"},
    )
    path: str | None = field(
        default=None,
        metadata={
            "help": "hf: a directory written by a transformers tokenizer's "
            "save_pretrained (e.g. a pretrained model's directory)"
        },
    )
    cache_dir: str | None = field(
        default=None,
        metadata={"help": "where trained tokenizers are cached; default $ZOO_CACHE or ~/.cache/zoo"},
    )

    def __post_init__(self) -> None:
        settle(self, "kind", TokenizerKind.parse(self.kind, "tokenizer.kind"))
        if self.path is not None and not isinstance(self.path, str):
            raise ConfigError(f"tokenizer.path must be a directory path, got {self.path!r}")
        if self.kind == TokenizerKind.hf and not self.path:
            raise ConfigError(
                "tokenizer=hf needs tokenizer.path: a directory written by a transformers tokenizer's save_pretrained"
            )
        if self.kind != TokenizerKind.hf and self.path is not None:
            raise ConfigError(f"tokenizer.path only applies to tokenizer=hf, not {self.kind.value}")
        if self.kind not in SENTENCEPIECE_KINDS:
            for f in fields(self):
                if f.name in _SENTENCEPIECE_PARAMS and getattr(self, f.name) != f.default:
                    raise ConfigError(
                        f"tokenizer.{f.name} only applies to tokenizer=sentencepiece_bpe or "
                        f"sentencepiece_unigram, not {self.kind.value}"
                    )
        _at_least("tokenizer.vocab_size", self.vocab_size, 16)
        _at_least("tokenizer.max_sentences", self.max_sentences, 1)
        if not 0.9 <= self.character_coverage <= 1.0:
            raise ConfigError(f"tokenizer.character_coverage must be in [0.9, 1], got {self.character_coverage}")

    def to_dict(self) -> dict:
        return plain(self)


@dataclass(kw_only=True, frozen=True)
class DataConfig:
    """Which examples, how they are split, and how they are batched."""

    source: DataSource = field(
        default=DataSource.kjv,
        metadata={"help": source_help()},
    )
    path: Any = field(
        default=None,
        metadata={
            "help": "local: a file, directory or glob, or a list of them (.txt, .jsonl/.json, .csv/.tsv, .parquet)"
        },
    )
    val_path: Any = field(
        default=None,
        metadata={"help": "local: validation files; default: split data.val_fraction off"},
    )
    hub_name: str | None = field(default=None, metadata={"help": "hub: dataset name"})
    hub_config: str | None = field(default=None, metadata={"help": "hub: config name"})
    sample_by: SampleBy = field(
        default=SampleBy.line, metadata={"help": "local .txt: one example per line, paragraph or document"}
    )
    text_column: str = field(default="text", metadata={"help": "input text column"})
    target_column: str = field(default="target", metadata={"help": "seq2seq: target column"})
    label_column: str = field(default="label", metadata={"help": "classification: label column"})
    seq_len: int = field(
        default=256,
        metadata={"help": "tokens per example: LM block length, longest source/target/text"},
    )
    global_batch_size: int = field(
        default=32,
        metadata={
            "help": "examples per optimizer step over all devices; per-device batch and "
            "gradient accumulation derive from it"
        },
    )
    max_device_batch_size: int | None = field(
        default=None,
        metadata={"help": "largest batch one device holds; beyond it gradients accumulate"},
    )
    val_fraction: float = field(
        default=0.05,
        metadata={"help": "share of examples held out for validation when the source has no validation split"},
    )
    split_seed: int = field(default=0, metadata={"help": "seed of the train/validation split"})
    num_workers: int = field(default=0, metadata={"help": "DataLoader worker processes"})
    streaming: bool = field(
        default=False,
        metadata={
            "help": f"{task_names(lambda spec: spec.packs)} from local files or the Hub: stream the documents "
            "(nothing downloaded whole or prepared), in corpus order"
        },
    )
    val_documents: int = field(
        default=1000,
        metadata={
            "help": "streaming without a validation split of its own: the first N documents "
            "of the stream are held out for validation"
        },
    )
    num_proc: int | None = field(
        default=None,
        metadata={
            "help": "processes that tokenize a corpus when it is prepared "
            f"({task_names(lambda spec: spec.packs, 'and')}); default: every core"
        },
    )
    max_examples: int | None = field(default=None, metadata={"help": "keep only the first N examples (smoke runs)"})
    num_pairs: int = field(default=10000, metadata={"help": "numbers: pairs for n = 0 .. num_pairs-1"})
    mlm_probability: float = field(default=0.15, metadata={"help": "masked_lm: share of non-special tokens to predict"})
    sample_prompt: str | None = field(
        default=None,
        metadata={
            "help": "causal_lm: the prompt of the greedy sample in summary.json; null: the "
            "first words of the validation text, so the prompt belongs to the corpus"
        },
    )
    cache_dir: str | None = field(
        default=None,
        metadata={"help": "where datasets caches files; default $ZOO_CACHE or ~/.cache/zoo"},
    )
    document_mask: bool = field(
        default=False,
        metadata={
            "help": "causal_lm: attend within each packed document only (block-diagonal causal "
            "attention, positions restarting at 0 at each document, the first token of a "
            "document not predicted from the one before); false: windows attend across documents"
        },
    )
    allow_changed_files: bool = field(
        default=False,
        metadata={
            "help": "resume even though a local data file changed since the checkpoint was written "
            "(refused otherwise); the change is recorded in summary.json and the checkpoints"
        },
    )
    # batch-size warmup and sequence-length warmup (zoo.config.facts.ramps)
    batch_warmup: Any = field(
        default=None,
        metadata={
            "help": "causal_lm: [[step, global batch], ...] from step 0, rising, ending at "
            "data.global_batch_size: the batch of each stage (the micro-batch changes, the accumulation does not)"
        },
    )
    batch_warmup_lr: BatchWarmupLR = field(
        default=BatchWarmupLR.constant,
        metadata={
            "help": "during data.batch_warmup the learning rate is the schedule's (constant) or "
            "times batch / full batch (linear) or its square root (sqrt)"
        },
    )
    seq_len_warmup: Any = field(
        default=None,
        metadata={
            "help": "causal_lm: [[step, context], ...] from step 0, rising, each dividing data.seq_len "
            "and ending at it: each window is cut into rows of the stage's context (same tokens per step)"
        },
    )
    # the associative-recall probe's training data (data.source=recall; zoo.config.schema.recall)
    recall_vocab: int = field(
        default=256, metadata={"help": "recall: symbols (keys: the lower half, values: the upper half)"}
    )
    recall_pairs: int = field(default=8, metadata={"help": "recall: key-value pairs in each sequence"})
    recall_examples: int = field(default=20000, metadata={"help": "recall: sequences drawn (before the split)"})
    recall_power: float = field(
        default=0.01,
        metadata={"help": "recall: query placement exponent a > 0, P(slot g) ~ g^(a-1) (Zoology's 0.01: most early)"},
    )
    recall_seed: int = field(default=0, metadata={"help": "recall: seed of the sequences"})
    recall_loss: RecallLoss = field(
        default=RecallLoss.answers,
        metadata={"help": "recall: the loss on the values after the queries only (answers) or on every position (all)"},
    )
    # the data-order seed, apart from the init seed (zoo.compare.noise attributes variance to each)
    order_seed: int | None = field(
        default=None,
        metadata={
            "help": "seed of the training data order (the shuffle of the training split and the loader's "
            "draws); null: follows seed, as before. Initialisation and dropout follow seed alone"
        },
    )

    def __post_init__(self) -> None:
        settle(self, "source", DataSource.parse(self.source, "data.source"))
        settle(self, "sample_by", SampleBy.parse(self.sample_by, "data.sample_by"))
        settle(self, "path", _paths("data.path", self.path))
        settle(self, "val_path", _paths("data.val_path", self.val_path))
        if self.source == DataSource.local and self.path is None:
            raise ConfigError("data.source=local needs data.path (a file, directory or glob)")
        if self.source != DataSource.local:
            for key in ("path", "val_path"):
                if getattr(self, key) is not None:
                    raise ConfigError(f"data.{key} only applies to data.source=local, not {self.source.value}")
        if self.source == DataSource.hub and not self.hub_name:
            raise ConfigError("data.source=hub needs data.hub_name (a Hugging Face dataset name)")
        if self.source != DataSource.hub and (self.hub_name or self.hub_config):
            raise ConfigError(f"data.hub_name / data.hub_config only apply to data.source=hub, not {self.source.value}")
        for key in ("text_column", "target_column", "label_column"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key):
                raise ConfigError(f"data.{key} must be a non-empty column name")
        _at_least("data.seq_len", self.seq_len, 2)
        _at_least("data.global_batch_size", self.global_batch_size, 1)
        if self.max_device_batch_size is not None:
            _at_least("data.max_device_batch_size", self.max_device_batch_size, 1)
        if not 0.0 < self.val_fraction < 1.0:
            raise ConfigError(f"data.val_fraction must be in (0, 1), got {self.val_fraction}")
        _at_least("data.split_seed", self.split_seed, 0)
        _at_least("data.num_workers", self.num_workers, 0)
        _at_least("data.val_documents", self.val_documents, 1)
        if self.streaming and self.source not in (DataSource.local, DataSource.hub):
            raise ConfigError(
                f"data.streaming=true reads local files or a Hub dataset, not data.source={self.source.value}"
            )
        if self.streaming and self.num_workers:
            raise ConfigError(
                "data.streaming=true reads in the training process (its position is "
                "saved in checkpoints); set data.num_workers=0"
            )
        if self.streaming and self.max_examples is not None:
            raise ConfigError(
                "data.max_examples does not apply to data.streaming=true; the stream ends at trainer.max_steps"
            )
        if self.num_proc is not None:
            _at_least("data.num_proc", self.num_proc, 1)
        if self.max_examples is not None:
            _at_least("data.max_examples", self.max_examples, 2)
        _at_least("data.num_pairs", self.num_pairs, 2)
        if not isinstance(self.document_mask, bool):
            raise ConfigError(f"data.document_mask must be true or false, got {self.document_mask!r}")
        if not 0.0 < self.mlm_probability < 1.0:
            raise ConfigError(f"data.mlm_probability must be in (0, 1), got {self.mlm_probability}")
        settle(self, "batch_warmup", parse_points("data.batch_warmup", self.batch_warmup))
        settle(self, "batch_warmup_lr", BatchWarmupLR.parse(self.batch_warmup_lr, "data.batch_warmup_lr"))
        settle(self, "seq_len_warmup", parse_points("data.seq_len_warmup", self.seq_len_warmup))
        check_ramps(self)
        settle(self, "recall_loss", RecallLoss.parse(self.recall_loss, "data.recall_loss"))
        check_recall_data(self, {f.name: f.default for f in fields(self) if f.name in RECALL_KEYS})
        if self.order_seed is not None:
            _at_least("data.order_seed", self.order_seed, 0)

    def to_dict(self) -> dict:
        return plain(self)


def check_document_mask(data: DataConfig, task: TaskKind | str) -> None:
    """data.document_mask=true needs packed windows of documents that end in eos and a causal
    stack: task=causal_lm (whose family is decoder_only); ConfigError otherwise."""
    spec = task_spec(task)
    if data.document_mask and spec.collate != Collate.causal:
        raise ConfigError(
            f"data.document_mask=true applies to task=causal_lm (packed documents attended "
            f"apart), not task={spec.kind.value}"
        )


def as_data_config(cfg: Any) -> DataConfig:
    """Validate a composed `data:` node, a dict or a `DataConfig`; raises `ConfigError`."""
    return as_schema(cfg, DataConfig, "data")


def as_tokenizer_config(cfg: Any) -> TokenizerConfig:
    """Validate a composed `tokenizer:` node, a dict or a `TokenizerConfig`."""
    return as_schema(cfg, TokenizerConfig, "tokenizer")


def _paths(key: str, value: Any):
    """None, one path string, or a list of path strings (OmegaConf ListConfig included), kept as
    a tuple."""
    if value is None or isinstance(value, str):
        if value == "":
            raise ConfigError(f"{key} must not be empty")
        return value
    try:
        items = list(value)
    except TypeError:
        raise ConfigError(f"{key} must be a path string or a list of them, got {type(value).__name__}") from None
    if not items or not all(isinstance(p, str) and p for p in items):
        raise ConfigError(f"{key} must be a path string or a non-empty list of path strings")
    return tuple(items)


def _at_least(key: str, value, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ConfigError(f"{key} must be an integer >= {low}, got {value!r}")
