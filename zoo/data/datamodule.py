"""`ZooDataModule`: one LightningDataModule for every task shape.

    DataConfig ──load_splits──► raw train / validation ──build_tokenizer (a sample of train)──►
      packing tasks (causal_lm, masked_lm): prepared token shards (zoo.data.prepared,
                             memory-mapped) ──► windows of the packed stream
      the others (seq2seq, classification): tokenize (datasets.map, cached), pad per batch
    ──► DataLoader(collate_fn) ──► dict of LongTensors, batch-first

What a task reads and how it is batched (its columns, special tokens, packing, tokenizing step
and collate function) is its row of `zoo.config.facts.tasks.TASK_SPECS`; this module follows the row.

The tokenizer and the prepared shards are cache entries named by `corpus_key` (the corpus's
content and split) without reading the corpus: a run that finds both never loads the text.
`prepare_data` (local rank 0 only) trains the tokenizer, prepares and verifies the shards; every
rank then calls `setup`, which maps the same shards.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import lightning as L
import torch

from zoo.config.facts.ramps import check_ramp_task, micro_batches, value_at
from zoo.config.facts.tasks import Collate, TaskSpec, Tokenize, task_names, task_spec
from zoo.config.schema.batching import per_device_batch
from zoo.config.schema.data import (
    SENTENCEPIECE_KINDS,
    DataConfig,
    DataSource,
    TokenizerConfig,
    as_data_config,
    as_tokenizer_config,
    check_document_mask,
)
from zoo.config.schema.recall import RecallLoss
from zoo.data.cache import cache_root
from zoo.data.collate import collate_for
from zoo.data.collate.padding import without_full_masks
from zoo.data.collate.recall import RecallCollate
from zoo.data.errors import DataError
from zoo.data.even_batches import EvenBatches
from zoo.data.packing import PackedBlocks
from zoo.data.prepared import FORMAT, Prepared, entry_dir, open_prepared, prepare
from zoo.data.ramps import RampedLoader, cut_rows
from zoo.data.resumable import EpochShardSampler, ResumableLoader, ValidationShardSampler, fixed_generator
from zoo.data.sources import corpus_key, describe, load_splits, require_columns
from zoo.data.specials import require_specials
from zoo.data.streaming import StreamedWindows, StreamLoader, held_out_windows, open_stream
from zoo.data.tokenize import tokenize_classification, tokenize_lm, tokenize_seq2seq
from zoo.data.tokenizers import Tokenizer, build_tokenizer
from zoo.data.vocab import check_vocab


class ZooDataModule(L.LightningDataModule):
    """Batches for `task` (causal_lm, masked_lm, seq2seq, classification) from `data` and
    `tokenizer` configs (dataclasses, dicts or composed Hydra nodes); `tokenizer` may also be
    a built `Tokenizer` (a checkpoint's), used as it is.

    After `setup()`: `tokenizer`, `vocab_size`, `batch_size` (per device),
    `accumulate_grad_batches`, and for classification `labels` (label names, index = class
    id) / `num_classes`. The per-device batch derives from `data.global_batch_size` and the
    world size (the attached Trainer's, else `world_size`), unless `batch_size` fixes it."""

    def __init__(
        self,
        data: Any = None,
        tokenizer: Any = None,
        task: Any = "causal_lm",
        *,
        seed: int = 0,
        world_size: int = 1,
        batch_size: int | None = None,
    ):
        super().__init__()
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise DataError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.fixed_batch_size = batch_size
        self.data_cfg: DataConfig = as_data_config(data)
        given = tokenizer if isinstance(tokenizer, Tokenizer) else None
        self.tokenizer_cfg: TokenizerConfig | None = None if given else as_tokenizer_config(tokenizer)
        self.spec: TaskSpec = task_spec(task)
        check_document_mask(self.data_cfg, self.spec.kind)
        check_ramp_task(self.data_cfg, self.spec.kind.value, self.spec.collate == Collate.causal)
        self.task = self.spec.kind
        self.seed = seed
        self.world_size = world_size
        self.tokenizer: Tokenizer | None = given
        self.label_names: list | None = None
        self.train_dataset: torch.utils.data.Dataset | _Stream | None = None
        self.val_dataset: torch.utils.data.Dataset | None = None
        self._splits = None
        self._tokenized: dict | None = None
        self._prepared: Prepared | None = None
        self.part = None  # zoo-prepare part=I/N: prepare every N-th shard only
        self._corpus_key: str | None = None  # None: a Hub dataset, known once loaded
        self._corpus_known = False  # _corpus_key computed
        self._derive_batch(world_size)

    # ---- Lightning hooks -------------------------------------------------------------------

    def prepare_data(self) -> None:
        """Local rank 0, before `setup`: train the tokenizer and tokenize (language models:
        prepare the token shards and check their digests), so that every cache entry exists
        when the other ranks look."""
        if self.train_dataset is not None or self.data_cfg.streaming:
            return
        if self.spec.packs:
            self._prepared_data(verify=True)
        else:
            self._tokenized_splits()

    def setup(self, stage: str | None = None) -> None:
        if self.train_dataset is not None:
            return
        trainer = getattr(self, "trainer", None)
        self._derive_batch(trainer.world_size if trainer is not None else self.world_size)
        if self.spec.packs and self.data_cfg.streaming:
            self._setup_stream()
        elif self.spec.packs:
            # the digests are checked once per machine: by prepare_data, or here on local rank 0
            prepared = self._prepared_data(verify=_local_rank() == 0)
            seq_len = self.data_cfg.seq_len
            block = self.spec.window(seq_len)
            self.train_dataset, self.val_dataset = (
                PackedBlocks(prepared.streams[s], block=block, stride=seq_len, name=s) for s in ("train", "validation")
            )
        else:
            tokenized = self._tokenized_splits()
            self.train_dataset, self.val_dataset = tokenized["train"], tokenized["validation"]
        self._splits = self._tokenized = None  # raw and intermediate data are no longer needed

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Masks without padding are left out here, on the CPU (`without_full_masks`); in
        training under data.seq_len_warmup, the windows are cut to the step's context."""
        trainer = getattr(self, "trainer", None)
        ramp = self.data_cfg.seq_len_warmup
        if ramp is not None and trainer is not None and trainer.training:
            batch = cut_rows(batch, value_at(ramp, trainer.global_step))
        return without_full_masks(batch)

    def train_dataloader(self) -> torch.utils.data.DataLoader | EvenBatches:
        return self._loader(self.train_dataset, train=True)

    def val_dataloader(self) -> torch.utils.data.DataLoader | EvenBatches:
        return self._loader(self.val_dataset, train=False)

    # ---- what the task needs ---------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """V of the tokenizer (after setup)."""
        return self._require_tokenizer().vocab_size

    @property
    def labels(self) -> list | None:
        """Classification: label names in class-id order (None for other tasks)."""
        return self.label_names

    @property
    def num_classes(self) -> int | None:
        return None if self.label_names is None else len(self.label_names)

    def token_counts(self, vocab_size: int) -> tuple | None:
        """Language models: how often each id occurs in the training and validation streams
        ([V] each), from the prepared data (no pass over the tokens); None for a stream."""
        if self.data_cfg.streaming:
            return None
        if self._prepared is None:
            raise DataError(f"token counts exist for {task_names(lambda spec: spec.packs)} data after setup()")
        return tuple(_fit(self._prepared.counts(s), vocab_size) for s in ("train", "validation"))

    @property
    def prepared(self):
        """The `zoo.data.prepared.Prepared` entry the language-model splits are read from."""
        return self._prepared

    def check_vocab(self, model_vocab_size: int) -> None:
        """ConfigError unless the model can embed every id of the tokenizer."""
        check_vocab(model_vocab_size, self._require_tokenizer())

    # ---- internals -------------------------------------------------------------------------

    def _derive_batch(self, world_size: int) -> None:
        if self.fixed_batch_size is not None:
            self.batch_size, self.accumulate_grad_batches = self.fixed_batch_size, 1
            return
        self.batch_size, self.accumulate_grad_batches = per_device_batch(
            self.data_cfg.global_batch_size, world_size, self.data_cfg.max_device_batch_size
        )

    def _prepared_data(self, verify: bool):
        """The prepared token shards of both splits: found by their key, or made (parallel
        tokenization of the raw splits) and then found."""
        if self._prepared is not None:
            return self._prepared
        cfg = self.data_cfg
        corpus = self._corpus()
        tokenizer = self._build_tokenizer()
        require_specials(tokenizer, self.task)
        if corpus is None:  # a Hub dataset: named by what was loaded
            splits = self._raw_splits()
            corpus = splits["train"]._fingerprint + splits["validation"]._fingerprint
        key = hashlib.sha256(
            json.dumps(
                {
                    "corpus": corpus,
                    "tokenizer": tokenizer.fingerprint(),
                    "format": FORMAT,
                    "text_column": cfg.text_column,
                },
                sort_keys=True,
            ).encode()
        ).hexdigest()[:32]
        entry = entry_dir(cache_root(cfg.cache_dir), key)
        found = open_prepared(entry, verify=verify, vocab_size=tokenizer.vocab_size)
        if found is None:
            found = prepare(
                entry,
                self._raw_splits(),
                tokenizer,
                cfg.text_column,
                num_proc=cfg.num_proc,
                describe=describe(cfg),
                part=self.part,
            )
        self._prepared = found
        return found

    def _setup_stream(self) -> None:
        """Streaming: validation = the first `val_documents` documents (of the validation
        split where there is one, else of the stream, which training then starts after), read
        into memory; training = a stream of windows, opened by the training loader."""
        cfg = self.data_cfg
        column, n_val = cfg.text_column, cfg.val_documents
        own_validation = cfg.val_path is not None or (cfg.source == DataSource.hub and _hub_has_validation(cfg))
        held = 0 if own_validation else n_val
        val_split = "validation" if own_validation else "train"

        def texts():
            limit = self.tokenizer_cfg.max_sentences if self.tokenizer_cfg is not None else None
            return open_stream(cfg, column, skip=held, first=limit)

        if self.tokenizer is None:
            corpus = (
                self._corpus()
                or hashlib.sha256(json.dumps([cfg.hub_name, cfg.hub_config, "stream"]).encode()).hexdigest()
            )
            assert self.tokenizer_cfg is not None  # the datamodule was given a config, not a tokenizer
            self.tokenizer = build_tokenizer(self.tokenizer_cfg, texts, corpus=corpus)
        require_specials(self.tokenizer, self.task)
        seq_len = cfg.seq_len
        block = self.spec.window(seq_len)
        val_ids = held_out_windows(open_stream(cfg, column, skip=0, split=val_split, first=n_val), self.tokenizer)
        if not own_validation and int((val_ids == self.tokenizer.eos_id).sum()) < n_val:
            raise DataError(
                f"data.val_documents={n_val} holds out every document of the stream (it has "
                f"{int((val_ids == self.tokenizer.eos_id).sum()):,}), leaving none to train on: lower "
                "data.val_documents or give data.val_path"
            )
        self.val_dataset = PackedBlocks(val_ids, block=block, stride=seq_len, name="validation")
        self.train_dataset = _Stream(lambda doc: open_stream(cfg, column, skip=held + doc), block, seq_len)

    def _corpus(self) -> str | None:
        if not self._corpus_known:
            self._corpus_key, self._corpus_known = corpus_key(self.data_cfg), True
        return self._corpus_key

    def _tokenized_splits(self) -> dict:
        """{"train": ..., "validation": ...} datasets of id columns, by the task's tokenizing step."""
        if self._tokenized is None:
            splits = self._raw_splits()
            tokenizer = self._build_tokenizer()
            require_specials(tokenizer, self.task)
            cfg = self.data_cfg
            if self.spec.tokenize == Tokenize.documents:
                fn = lambda ds: tokenize_lm(ds, tokenizer, cfg.text_column)  # noqa: E731
            elif self.spec.tokenize == Tokenize.pairs:
                fn = lambda ds: tokenize_seq2seq(  # noqa: E731
                    ds, tokenizer, cfg.text_column, cfg.target_column, cfg.seq_len
                )
            elif self.spec.tokenize == Tokenize.labelled:
                label_ids = self._label_ids(splits)
                fn = lambda ds: tokenize_classification(  # noqa: E731
                    ds, tokenizer, cfg.text_column, cfg.label_column, label_ids, cfg.seq_len
                )
            else:
                raise ValueError(
                    f"tokenize {self.spec.tokenize.value} has a member in zoo.config.facts.tasks.Tokenize "
                    f"but no branch here"
                )
            self._tokenized = {s: fn(splits[s]) for s in ("train", "validation")}
        return self._tokenized

    def _raw_splits(self):
        if self._splits is None:
            splits = load_splits(self.data_cfg)
            for name in ("train", "validation"):
                require_columns(splits[name], self._columns(), f"the {name} split of {describe(self.data_cfg)}")
            self._splits = splits
        return self._splits

    def _columns(self) -> dict[str, str]:
        """{"data.<field>": column} of every column the task reads."""
        return {f"data.{name}": getattr(self.data_cfg, name) for name in self.spec.columns}

    def _build_tokenizer(self) -> Tokenizer:
        if self.tokenizer is None:
            columns = [getattr(self.data_cfg, name) for name in self.spec.text_columns]

            def texts():
                return _training_texts(self._raw_splits()["train"], columns, self.tokenizer_cfg)

            assert self.tokenizer_cfg is not None  # the datamodule was given a config, not a tokenizer
            self.tokenizer = build_tokenizer(self.tokenizer_cfg, texts, corpus=self._corpus())
        return self.tokenizer

    def _label_ids(self, splits) -> dict:
        """Label value -> id 0..K-1 from the training split (a ClassLabel keeps its ids);
        DataError for a missing label or a validation label never seen in training."""
        column = self.data_cfg.label_column
        feature = splits["train"].features[column]
        names = getattr(feature, "names", None)
        if names is not None:
            values = list(range(len(names)))
            self.label_names = list(names)
        else:
            train_values = set(splits["train"][column])
            if None in train_values:
                raise DataError(f"data.label_column={column!r}: some training examples have no label")
            values = sorted(train_values, key=lambda v: (str(type(v)), v))
            self.label_names = [v if isinstance(v, (int, str)) else str(v) for v in values]
        if len(values) < 2:
            raise DataError(
                f"data.label_column={column!r}: the training split has "
                f"{len(values)} distinct label(s); classification needs at least 2"
            )
        label_ids = {v: i for i, v in enumerate(values)}
        unseen = set(splits["validation"][column]) - set(label_ids)
        if unseen:
            shown = ", ".join(repr(v) for v in sorted(unseen, key=str)[:5])
            raise DataError(
                f"data.label_column={column!r}: validation labels never seen in training: "
                f"{shown}; known labels: {', '.join(map(repr, values[:10]))}"
            )
        return label_ids

    def _loader(self, dataset, train: bool) -> torch.utils.data.DataLoader | EvenBatches:
        """Training: a `ResumableLoader` over this rank's shard of a seeded per-epoch shuffle
        (its position is saved in checkpoints). Validation: in order, each rank a disjoint
        share with no example repeated, from a fixed generator so that creating it never draws
        from the global RNG; over several ranks, as many batches on every rank
        (`zoo.data.even_batches`)."""
        if dataset is None:
            raise DataError("call setup() on the datamodule before asking for dataloaders")
        workers = self.data_cfg.num_workers
        common = dict(batch_size=self.batch_size, collate_fn=self._collate(train), num_workers=workers)
        trainer = getattr(self, "trainer", None)
        if not train:
            loader = torch.utils.data.DataLoader(
                dataset,
                sampler=ValidationShardSampler(dataset),
                drop_last=False,
                persistent_workers=workers > 0,
                generator=fixed_generator(self.seed),
                **common,
            )
            # as many batches on every rank (a sharded forward is a collective; a rank with no
            # example would stop Lightning): filler batches that count nowhere
            if trainer is not None and trainer.world_size > 1:
                return EvenBatches(loader, trainer.global_rank, trainer.world_size)
            return loader
        rank, world = (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)
        if isinstance(dataset, _Stream):
            windows = StreamedWindows(
                dataset.open_documents, self._require_tokenizer(), dataset.block, dataset.stride, rank=rank, world=world
            )
            return StreamLoader(windows, batch_size=self.batch_size, collate_fn=self._collate(train))
        sampler = EpochShardSampler(
            dataset, num_replicas=world, rank=rank, shuffle=True, seed=self.seed, drop_last=True
        )
        if self.data_cfg.batch_warmup is not None:  # the micro-batch follows the ramp
            accumulation = trainer.accumulate_grad_batches if trainer is not None else self.accumulate_grad_batches
            micro = micro_batches(self.data_cfg.batch_warmup, world, accumulation)
            common.pop("batch_size")
            return RampedLoader(
                dataset,
                sampler=sampler,
                micro=micro,
                accumulation=accumulation,
                drop_last=True,
                generator=fixed_generator(self.seed),
                **common,
            )
        return ResumableLoader(dataset, sampler=sampler, drop_last=True, generator=fixed_generator(self.seed), **common)

    def _collate(self, train: bool):
        if self.data_cfg.source.value == "recall" and self.data_cfg.recall_loss == RecallLoss.answers:
            return RecallCollate(self.data_cfg.recall_pairs)  # the loss on the answers only
        return collate_for(
            self.spec.collate,
            self._require_tokenizer(),
            mlm_probability=self.data_cfg.mlm_probability,
            seed=self.seed,
            train=train,
            document_mask=self.data_cfg.document_mask,
        )

    def _require_tokenizer(self) -> Tokenizer:
        if self.tokenizer is None:
            raise DataError("the tokenizer exists after setup(); call dm.setup() first")
        return self.tokenizer


class _Stream:
    """The training split of a stream, until the loader opens it for its rank."""

    def __init__(self, open_documents, block: int, stride: int):
        self.open_documents, self.block, self.stride = open_documents, block, stride


def _hub_has_validation(cfg) -> bool:
    from datasets import get_dataset_split_names

    try:
        return "validation" in get_dataset_split_names(cfg.hub_name, cfg.hub_config)
    except Exception:  # noqa: BLE001 - offline, or no such dataset: the stream reports it
        return False


def _local_rank() -> int:
    import os

    for name in ("LOCAL_RANK", "SLURM_LOCALID"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def _fit(counts, vocab_size: int):
    """Counts over the tokenizer's ids, padded to the model's vocabulary."""
    import numpy as np

    return np.pad(counts, (0, max(0, vocab_size - len(counts))))[:vocab_size]


def _training_texts(train, columns: list[str], cfg: TokenizerConfig | None):
    """The texts a tokenizer learns from, read in batches: every training document, or for
    SentencePiece, when the split has more documents than `tokenizer.max_sentences`, a seeded
    random sample of that many (the trainer samples lines from what it is given, so a larger
    sample would only cost time and memory)."""
    limit = cfg.max_sentences if cfg is not None and cfg.kind in SENTENCEPIECE_KINDS else None
    if limit is not None and len(train) > limit:
        import numpy as np

        picked = np.sort(np.random.default_rng(0).choice(len(train), size=limit, replace=False))
        train = train.select(picked)
    for column in columns:
        for batch in train.select_columns([column]).iter(batch_size=1000):
            for value in batch[column]:
                if value is not None:
                    yield value if isinstance(value, str) else str(value)


def build_datamodule(
    data: Any, tokenizer: Any, task: Any, *, batch_size: int | None = None, seed: int = 0, world_size: int = 1
) -> ZooDataModule:
    """The datamodule for `task` from the `data:` and `tokenizer:` configs. Pass the
    per-device `batch_size` from `per_device_batch` (the accumulation goes to the Trainer), or
    leave it None to derive it from `data.global_batch_size` and the world size at setup."""
    return ZooDataModule(data, tokenizer, task, seed=seed, world_size=world_size, batch_size=batch_size)
