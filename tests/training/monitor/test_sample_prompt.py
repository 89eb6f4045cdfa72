"""The sample in a causal-LM run's summary starts from a prompt that belongs to its corpus:
`data.sample_prompt` when the corpus config names one (the King James Bible: "And God said"),
else the first words of the validation text."""

from __future__ import annotations

from pathlib import Path

import zoo
from zoo.config.schema.data import DataConfig
from zoo.data.datamodule import ZooDataModule
from zoo.training.monitor.sample import corpus_prompt, sample_prompt


def _local_corpus(directory: Path) -> dict:
    train = directory / "train.txt"
    train.write_text("\n".join(f"the water under the heaven {i}" for i in range(40)) + "\n")
    val = directory / "val.txt"
    val.write_text("Let the earth bring forth grass\nand the evening and the morning\n")
    return {
        "source": "local",
        "path": str(train),
        "val_path": str(val),
        "seq_len": 16,
        "global_batch_size": 4,
        "cache_dir": str(directory / "cache"),
    }


def test_without_a_configured_prompt_the_validation_text_gives_it(tmp_path):
    data = _local_corpus(tmp_path)
    dm = ZooDataModule(data, {"kind": "byte"}, "causal_lm")
    dm.prepare_data()
    dm.setup("fit")
    assert corpus_prompt(dm, dm.tokenizer) == "Let the earth"
    assert corpus_prompt(dm, dm.tokenizer, words=5) == "Let the earth bring forth"
    assert sample_prompt(DataConfig(**data), dm, dm.tokenizer) == "Let the earth"
    assert sample_prompt(DataConfig(**data, sample_prompt="the water"), dm, dm.tokenizer) == "the water"


def test_each_built_in_causal_corpus_has_a_prompt_of_its_own():
    assert zoo.compose().data.sample_prompt == "And God said"  # the default run's corpus
    assert zoo.compose(["data=pydoc"]).data.sample_prompt is None  # its own first words instead
