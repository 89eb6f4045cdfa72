"""ZooDataModule end to end for each task shape, on small slices of the built-in corpora."""

import json

import lightning as L
import pytest
import torch

from zoo.config.errors import ConfigError
from zoo.data import IGNORE_INDEX, DataError, ZooDataModule, build_datamodule, load_tokenizer
from zoo.data.corpora import load_numbers


def _setup(task, data, tokenizer, **kwargs):
    dm = ZooDataModule(data, tokenizer, task, **kwargs)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def _batches(dm):
    train, val = next(iter(dm.train_dataloader())), next(iter(dm.val_dataloader()))
    for batch in (train, val):
        assert all(t.dtype == torch.long for t in batch.values())
    return train, val


def test_causal_lm_on_kjv(cache, tmp_path):
    dm = _setup(
        "causal_lm",
        {"source": "kjv", "seq_len": 32, "global_batch_size": 8, "max_examples": 400, "cache_dir": cache},
        {"kind": "sentencepiece_bpe", "vocab_size": 500, "cache_dir": cache},
    )
    assert dm.tokenizer is not None and dm.vocab_size == dm.tokenizer.vocab_size <= 500
    train, val = _batches(dm)
    assert train["input_ids"].shape == train["labels"].shape == (8, 32)
    assert torch.equal(train["labels"][:, :-1], train["input_ids"][:, 1:])
    assert (train["input_ids"] == dm.tokenizer.eos_id).any()  # documents are eos-separated
    assert int(train["input_ids"].max()) < dm.vocab_size
    assert len(dm.train_dataset) > 10 * len(dm.val_dataset) > 0
    text = dm.tokenizer.decode(train["input_ids"][0].tolist())
    assert len(text.split()) > 5
    saved = dm.tokenizer.save(tmp_path / "run" / "tokenizer")
    assert load_tokenizer(saved).encode(text) == dm.tokenizer.encode(text)
    dm.check_vocab(dm.vocab_size)
    with pytest.raises(ConfigError, match="model.vocab_size"):
        dm.check_vocab(dm.vocab_size - 1)


def test_masked_lm_on_pydoc(cache):
    dm = _setup(
        "masked_lm",
        {"source": "pydoc", "seq_len": 64, "global_batch_size": 16, "num_workers": 1, "cache_dir": cache},
        {"kind": "char", "cache_dir": cache},
    )
    train, val = _batches(dm)
    assert train["input_ids"].shape == train["labels"].shape == (16, 64)
    chosen = train["labels"] != IGNORE_INDEX
    assert 0.05 < chosen.float().mean() < 0.3
    assert (train["input_ids"][chosen] == dm.tokenizer.mask_id).any()
    assert not (train["input_ids"][~chosen] == dm.tokenizer.mask_id).any()


def test_seq2seq_on_numbers(cache):
    dm = _setup(
        "seq2seq",
        {
            "source": "numbers",
            "text_column": "source",
            "num_pairs": 1000,
            "seq_len": 64,
            "global_batch_size": 16,
            "cache_dir": cache,
        },
        {"kind": "byte"},
    )
    train, val = _batches(dm)
    tok = dm.tokenizer
    pairs = load_numbers(1000)
    to_spanish = dict(zip(pairs["source"], pairs["target"]))
    assert set(train) == {"input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask", "labels"}
    assert (train["decoder_input_ids"][:, 0] == tok.bos_id).all()
    for b in range(16):
        n = int(train["decoder_attention_mask"][b].sum())
        y = train["labels"][b, : n - 1].tolist()
        assert train["labels"][b, n - 1] == tok.eos_id
        assert train["decoder_input_ids"][b, 1:n].tolist() == y
        assert (train["labels"][b, n:] == IGNORE_INDEX).all()
        assert (train["decoder_input_ids"][b, n:] == tok.pad_id).all()
        m = int(train["attention_mask"][b].sum())
        assert train["input_ids"][b, m - 1] == tok.eos_id
        english = tok.decode(train["input_ids"][b, :m].tolist())
        assert tok.decode(y) == to_spanish[english]  # the pair survives tokenization
        assert (train["input_ids"][b, m:] == tok.pad_id).all()


def test_classification_on_testament(cache):
    dm = _setup(
        "classification",
        {"source": "testament", "seq_len": 512, "global_batch_size": 32, "max_examples": 2000, "cache_dir": cache},
        {"kind": "byte"},
    )
    assert dm.labels == ["new", "old"] and dm.num_classes == 2
    train, val = _batches(dm)
    assert train["labels"].shape == (32,) and set(train["labels"].tolist()) <= {0, 1}
    assert (train["input_ids"][:, 0] == dm.tokenizer.cls_id).all()
    lengths = train["attention_mask"].sum(1)
    assert lengths.max() == train["input_ids"].shape[1] < 512  # padded to the longest, not seq_len
    assert lengths.min() < lengths.max()
    short = _setup(
        "classification",
        {"source": "testament", "seq_len": 16, "max_examples": 100, "cache_dir": cache},
        {"kind": "byte"},
    )
    assert short.train_dataset[0]["input_ids"].__len__() == 16  # [cls] + 15 truncated bytes


def test_unseen_validation_label_is_refused(tmp_path, cache):
    train = tmp_path / "train.jsonl"
    val = tmp_path / "val.jsonl"
    train.write_text("\n".join(json.dumps({"text": f"t{i}", "label": "ab"[i % 2]}) for i in range(10)))
    val.write_text(json.dumps({"text": "v", "label": "zebra"}) + "\n")
    dm = ZooDataModule(
        {"source": "local", "path": str(train), "val_path": str(val), "cache_dir": cache},
        {"kind": "byte"},
        "classification",
    )
    with pytest.raises(DataError, match=r"validation labels never seen in training: 'zebra'; known labels: 'a', 'b'"):
        dm.setup()


def test_too_small_validation_for_one_block(cache):
    dm = ZooDataModule(
        {"source": "kjv", "seq_len": 256, "max_examples": 20, "cache_dir": cache}, {"kind": "byte"}, "causal_lm"
    )
    with pytest.raises(DataError, match="validation split has .* tokens, fewer than one block of 257"):
        dm.setup()


def test_task_needs_its_columns(cache):
    dm = ZooDataModule({"source": "numbers", "num_pairs": 100, "cache_dir": cache}, {"kind": "byte"}, "seq2seq")
    with pytest.raises(
        DataError,
        match=r"data.text_column='text' is not a column of the train "
        r"split of data.source=numbers; columns: source, target, n",
    ):
        dm.setup()
    with pytest.raises(ConfigError, match="task='lm' is not allowed; choose one of: causal_lm"):
        ZooDataModule({}, {}, "lm")


def test_batch_size_follows_the_trainer_world_size(cache):
    dm = ZooDataModule(
        {"source": "pydoc", "seq_len": 16, "global_batch_size": 8, "max_device_batch_size": 2, "cache_dir": cache},
        {"kind": "byte"},
        "causal_lm",
        world_size=2,
    )
    assert (dm.batch_size, dm.accumulate_grad_batches) == (2, 2)

    class Tiny(L.LightningModule):
        def __init__(self, vocab):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, 8)
            self.out = torch.nn.Linear(8, vocab)
            self.seen = []

        def training_step(self, batch, _):
            self.seen.append(tuple(batch["input_ids"].shape))
            logits = self.out(self.emb(batch["input_ids"]))
            return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    model = Tiny(262)
    trainer = L.Trainer(
        max_steps=2,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
    )
    trainer.fit(model, datamodule=dm)
    assert (dm.batch_size, dm.accumulate_grad_batches) == (2, 4)  # one device: 8 = 2 x 4
    assert model.seen == [(2, 16), (2, 16)]


def test_build_datamodule_with_a_fixed_device_batch(cache):
    dm = build_datamodule(
        {"source": "pydoc", "seq_len": 16, "global_batch_size": 8, "cache_dir": cache},
        {"kind": "byte"},
        "causal_lm",
        batch_size=4,
    )
    dm.setup()
    assert (dm.batch_size, dm.accumulate_grad_batches) == (4, 1)
    assert next(iter(dm.train_dataloader()))["input_ids"].shape == (4, 16)
    with pytest.raises(DataError, match="batch_size must be a positive integer"):
        build_datamodule({}, {}, "causal_lm", batch_size=0)
