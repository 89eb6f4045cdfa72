"""The data layer: corpora and files -> tokenizer -> batches for each task shape.

Entry points for the training code:
    build_datamodule(data_cfg, tokenizer_cfg, task, batch_size=None, seed=0, world_size=1)
        -> ZooDataModule (a LightningDataModule)
    per_device_batch(global_batch_size, world_size, max_per_device=None) -> (batch, accumulation)
    check_vocab(model_vocab_size, tokenizer)
    build_tokenizer(tokenizer_cfg, texts) / load_tokenizer(directory)
    load_splits(data_cfg) -> DatasetDict(train, validation)
"""

from zoo.config.batching import per_device_batch
from zoo.data.collate import (
    IGNORE_INDEX,
    MaskingCollator,
    collate_causal,
    collate_classification,
    collate_seq2seq,
)
from zoo.data.corpora import CORPORA
from zoo.data.datamodule import ZooDataModule, build_datamodule
from zoo.data.errors import DataError
from zoo.data.files import load_files
from zoo.data.packing import PackedBlocks
from zoo.data.sources import load_splits
from zoo.data.split import split_train_val
from zoo.data.tokenizers import (
    SPECIAL_IDS,
    TOKENIZERS,
    Tokenizer,
    build_tokenizer,
    load_tokenizer,
)
from zoo.data.vocab import check_vocab

__all__ = [
    "CORPORA",
    "IGNORE_INDEX",
    "SPECIAL_IDS",
    "TOKENIZERS",
    "DataError",
    "MaskingCollator",
    "PackedBlocks",
    "Tokenizer",
    "ZooDataModule",
    "build_datamodule",
    "build_tokenizer",
    "check_vocab",
    "collate_causal",
    "collate_classification",
    "collate_seq2seq",
    "load_files",
    "load_splits",
    "load_tokenizer",
    "per_device_batch",
    "split_train_val",
]
