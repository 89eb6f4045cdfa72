"""The data layer: corpora and files -> tokenizer -> batches for each task shape.

Entry points for the training code:
    build_datamodule(data_cfg, tokenizer_cfg, task, batch_size=None, seed=0, world_size=1)
        -> ZooDataModule (a LightningDataModule)
    per_device_batch(global_batch_size, world_size, max_per_device=None) -> (batch, accumulation)
    check_vocab(model_vocab_size, tokenizer)
    build_tokenizer(tokenizer_cfg, texts) / load_tokenizer(directory)
    load_splits(data_cfg) -> DatasetDict(train, validation)
"""

from zoo.config.lazy import lazy_exports

# name -> the module that defines it; imported on first use (PEP 562), so that a torch-free part
# such as `zoo.data.files` can be imported without the loaders, collators and torch
_EXPORTS = {
    "per_device_batch": "zoo.config.schema.batching",
    "IGNORE_INDEX": "zoo.data.collate",
    "MaskingCollator": "zoo.data.collate",
    "collate_causal": "zoo.data.collate",
    "collate_classification": "zoo.data.collate",
    "collate_seq2seq": "zoo.data.collate",
    "CORPORA": "zoo.data.corpora",
    "ZooDataModule": "zoo.data.datamodule",
    "build_datamodule": "zoo.data.datamodule",
    "DataError": "zoo.data.errors",
    "load_files": "zoo.data.files",
    "PackedBlocks": "zoo.data.packing",
    "load_splits": "zoo.data.sources",
    "split_train_val": "zoo.data.split",
    "SPECIAL_IDS": "zoo.data.tokenizers",
    "TOKENIZERS": "zoo.data.tokenizers",
    "Tokenizer": "zoo.data.tokenizers",
    "build_tokenizer": "zoo.data.tokenizers",
    "load_tokenizer": "zoo.data.tokenizers",
    "check_vocab": "zoo.data.vocab",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
