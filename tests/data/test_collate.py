"""Batch construction: BERT masking, seq2seq teacher forcing, classification padding."""

import torch

from zoo.data import IGNORE_INDEX, MaskingCollator, collate_classification, collate_seq2seq
from zoo.data.tokenizers.base import NUM_SPECIAL, SPECIAL_IDS

PAD, BOS, EOS, MASK, CLS = (SPECIAL_IDS[k] for k in ("pad", "bos", "eos", "mask", "cls"))


def test_mlm_masking_ratios():
    V = 1000
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(NUM_SPECIAL, V, (64, 512), generator=g)
    ids[:, ::10] = EOS  # special tokens are never chosen
    collate = MaskingCollator(V, probability=0.15, seed=123)
    batch = collate(list(ids))
    x, labels = batch["input_ids"], batch["labels"]
    chosen = labels != IGNORE_INDEX
    maskable = ids >= NUM_SPECIAL
    assert not (chosen & ~maskable).any()
    assert torch.equal(labels[chosen], ids[chosen])
    assert abs(chosen.sum().item() / maskable.sum().item() - 0.15) < 0.01
    n = chosen.sum().item()
    to_mask = (x == MASK) & chosen
    kept = (x == ids) & chosen
    replaced = chosen & ~to_mask & ~kept
    assert abs(to_mask.sum().item() / n - 0.8) < 0.02
    assert abs(replaced.sum().item() / n - 0.1) < 0.015
    assert abs(kept.sum().item() / n - 0.1) < 0.015  # (random may equal the original: ~0.01%)
    assert torch.equal(x[~chosen], ids[~chosen])
    assert x[replaced].min() >= NUM_SPECIAL and x[replaced].max() < V
    assert "attention_mask" not in batch  # packed blocks: nothing is padding


def test_mlm_masking_is_seeded():
    ids = list(torch.randint(NUM_SPECIAL, 500, (8, 64), generator=torch.Generator().manual_seed(1)))
    a = MaskingCollator(500, seed=7)(ids)
    b = MaskingCollator(500, seed=7)(ids)
    c = MaskingCollator(500, seed=8)(ids)
    assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], b["labels"])
    assert not torch.equal(a["labels"], c["labels"])
    train = MaskingCollator(500, seed=7)
    first = train(ids)["labels"]
    assert torch.equal(train(ids)["labels"], first)  # same batch, same epoch: same mask (resumable)
    train.set_epoch(1)
    assert not torch.equal(train(ids)["labels"], first)  # a new epoch masks anew
    fixed = MaskingCollator(500, seed=7, fixed=True)
    assert torch.equal(fixed(ids)["labels"], fixed(ids)["labels"])  # validation: same each time


def test_seq2seq_teacher_forcing_shift():
    examples = [
        {"input_ids": [10, 11, 12, EOS], "target_ids": [20, 21]},
        {"input_ids": [13, EOS], "target_ids": [22, 23, 24, 25]},
    ]
    b = collate_seq2seq(examples)
    assert b["input_ids"].tolist() == [[10, 11, 12, EOS], [13, EOS, PAD, PAD]]
    assert b["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert b["decoder_input_ids"].tolist() == [[BOS, 20, 21, PAD, PAD], [BOS, 22, 23, 24, 25]]
    assert b["labels"].tolist() == [[20, 21, EOS, -100, -100], [22, 23, 24, 25, EOS]]
    assert b["decoder_attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    mask = b["decoder_attention_mask"].bool()
    assert torch.equal(b["decoder_input_ids"][:, 1:][mask[:, 1:]], b["labels"][:, :-1][mask[:, 1:]])
    assert all(t.dtype == torch.long for t in b.values())


def test_classification_padding_and_labels():
    b = collate_classification([{"input_ids": [CLS, 7, 8], "label": 1}, {"input_ids": [CLS], "label": 0}])
    assert b["input_ids"].tolist() == [[CLS, 7, 8], [CLS, PAD, PAD]]
    assert b["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert b["labels"].tolist() == [1, 0] and b["labels"].dtype == torch.long
