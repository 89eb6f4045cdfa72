"""data.document_mask: the option, where it is refused, and the batches the datamodule makes."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.config.errors import ConfigError
from zoo.config.schema.data import DataConfig
from zoo.config.schema.validate import validate
from zoo.data import IGNORE_INDEX, ZooDataModule


def test_off_by_default_and_a_bool_only():
    assert DataConfig().document_mask is False
    assert DataConfig(document_mask=True).document_mask is True
    with pytest.raises(ConfigError, match=r"^data.document_mask must be true or false, got 'yes'$"):
        DataConfig(document_mask="yes")


@pytest.mark.parametrize(
    "overrides",
    [["model=bert", "task=masked_lm"], ["model=transformer", "task=seq2seq"], ["model=bert", "task=classification"]],
)
def test_refused_on_one_line_for_tasks_without_packed_causal_documents(overrides):
    cfg = zoo.compose([*overrides, "data.document_mask=true", "trainer.max_steps=100"])
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    task = overrides[1].split("=")[1]
    assert str(info.value) == (
        f"data.document_mask=true applies to task=causal_lm (packed documents attended apart), not task={task}"
    )


def test_causal_lm_with_the_option_validates():
    zc = validate(zoo.compose(["model=gpt", "data.document_mask=true", "trainer.max_steps=100"]))
    assert zc.data.document_mask is True


def test_the_datamodule_refuses_it_for_masked_lm_too():
    with pytest.raises(ConfigError, match="not task=masked_lm"):
        ZooDataModule({"source": "kjv", "document_mask": True}, {"kind": "byte"}, "masked_lm")


def test_batches_carry_document_ids_that_start_after_each_eos(cache):
    data = {
        "source": "kjv",
        "seq_len": 32,
        "global_batch_size": 8,
        "max_examples": 200,
        "cache_dir": cache,
        "document_mask": True,
    }
    dm = ZooDataModule(data, {"kind": "byte", "cache_dir": cache}, "causal_lm")
    dm.prepare_data()
    dm.setup("fit")
    for batch in (next(iter(dm.train_dataloader())), next(iter(dm.val_dataloader()))):
        ids, docs, labels = batch["input_ids"], batch["document_ids"], batch["labels"]
        eos = ids == dm.tokenizer.eos_id
        assert eos.any() and docs.shape == ids.shape
        assert torch.equal(docs[:, 0], torch.zeros(len(ids), dtype=torch.long))
        # a document begins exactly after an eos, and the eos keeps no target across it
        assert torch.equal(docs[:, 1:] - docs[:, :-1], eos[:, :-1].long())
        assert (labels[eos] == IGNORE_INDEX).all() and not (labels[~eos] == IGNORE_INDEX).any()
    plain = ZooDataModule({**data, "document_mask": False}, {"kind": "byte", "cache_dir": cache}, "causal_lm")
    plain.setup("fit")
    assert "document_ids" not in next(iter(plain.train_dataloader()))
