"""The associative-recall sequences (MQAR): Zoology's layout with disjoint key and value
symbols, the power-law query placement, the same sequences for the same seed, the refusals of a
bad spec on one line, and the corpus `data=recall` whose windows are whole sequences."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.config.errors import ConfigError
from zoo.config.schema.data import DataConfig, TokenizerConfig
from zoo.config.schema.recall import RecallSpec, check_recall_run, recall_spec
from zoo.data.collate.masked import IGNORE_INDEX
from zoo.data.datamodule import ZooDataModule
from zoo.data.recall import SYMBOL_BASE, as_text, draw, slot_probabilities

SPEC = RecallSpec(vocab_size=64, seq_len=48, num_kv_pairs=6)


def test_the_layout_pairs_then_each_query_followed_by_its_value():
    drawn = draw(SPEC, 50, seed=3)
    n, pairs, half = 50, SPEC.num_kv_pairs, SPEC.vocab_size // 2
    assert drawn.symbols.shape == (n, SPEC.seq_len) and drawn.symbols.dtype == np.int64
    assert ((drawn.symbols >= 0) & (drawn.symbols < SPEC.vocab_size)).all()
    for row in range(n):
        seq = drawn.symbols[row]
        keys, values = seq[0 : 2 * pairs : 2], seq[1 : 2 * pairs : 2]
        assert ((keys >= 1) & (keys < half)).all() and len(set(keys)) == pairs  # distinct keys, lower half
        assert ((values >= half) & (values < SPEC.vocab_size)).all() and len(set(values)) == pairs
        assert list(drawn.keys[row]) == list(range(0, 2 * pairs, 2))
        q = drawn.queries[row]
        assert (q >= 2 * pairs).all() and (q % 2 == 0).all() and len(set(q)) == pairs
        assert list(seq[q]) == list(keys) and list(seq[q + 1]) == list(values) == list(drawn.values[row])
    assert (drawn.distances >= 2).all()


def test_queries_follow_the_power_law_most_of_them_early():
    spec = RecallSpec(vocab_size=256, seq_len=256, num_kv_pairs=8)
    p = slot_probabilities(spec)
    assert p.shape == (spec.slots,) and abs(p.sum() - 1) < 1e-12 and (np.diff(p) < 0).all()
    a, g = spec.power_a, np.arange(1, spec.slots + 1)
    assert np.allclose(p, g ** (a - 1) / (g ** (a - 1)).sum())
    slots = (draw(spec, 400, seed=0).queries - 2 * spec.num_kv_pairs) // 2
    early = (slots < spec.slots // 4).mean()
    assert early > 0.25  # uniform placement without repetition would put 25% in the first quarter


def test_the_same_seed_draws_the_same_sequences_and_another_seed_others():
    a, b, c = draw(SPEC, 20, seed=7), draw(SPEC, 20, seed=7), draw(SPEC, 20, seed=8)
    assert np.array_equal(a.symbols, b.symbols) and np.array_equal(a.queries, b.queries)
    assert not np.array_equal(a.symbols, c.symbols)
    # the first sequences do not depend on how many are drawn after them
    assert np.array_equal(draw(SPEC, 5, seed=7).symbols, a.symbols[:5])


@pytest.mark.parametrize(
    "kwargs, line",
    [
        (
            dict(vocab_size=16, seq_len=64, num_kv_pairs=8),
            "data.recall_pairs=8 is more pairs than the 7 keys of data.recall_vocab=16 (keys are symbols "
            "1 .. vocab/2 - 1): raise data.recall_vocab to 18 or lower data.recall_pairs",
        ),
        (
            dict(vocab_size=64, seq_len=20, num_kv_pairs=6),
            "data.recall_pairs=6 needs sequences of 24 symbols or more (the pairs, then as many query "
            "slots of two), got 20 (data.seq_len): raise it or lower data.recall_pairs",
        ),
        (dict(vocab_size=2, seq_len=8, num_kv_pairs=1), "data.recall_vocab must be between 4 and 20992 symbols, got 2"),
        (dict(vocab_size=64, seq_len=32, num_kv_pairs=0), "data.recall_pairs must be a whole number >= 1, got 0"),
        (
            dict(vocab_size=64, seq_len=32, num_kv_pairs=2, power_a=0.0),
            "data.recall_power must be a number above 0 (Zoology's 0.01: most queries early; 1: uniform), got 0.0",
        ),
    ],
)
def test_a_bad_spec_is_one_line(kwargs, line):
    with pytest.raises(ConfigError) as caught:
        RecallSpec(**kwargs)
    assert str(caught.value) == line


def test_data_keys_are_checked_and_refused_for_other_sources():
    with pytest.raises(ConfigError, match=r"^data.recall_pairs=20 needs sequences of 80 symbols or more .* got 64 "):
        DataConfig(source="recall", seq_len=65, recall_pairs=20)
    with pytest.raises(ConfigError, match=r"^data.recall_pairs only applies to data.source=recall, not kjv$"):
        DataConfig(source="kjv", recall_pairs=4)
    with pytest.raises(ConfigError, match=r"^data.recall_examples must be an integer >= 2, got 1$"):
        DataConfig(source="recall", recall_examples=1)
    data = DataConfig(source="recall", seq_len=33, recall_vocab=40, recall_pairs=3)
    assert recall_spec(data) == RecallSpec(vocab_size=40, seq_len=32, num_kv_pairs=3)
    with pytest.raises(
        ConfigError, match=r"^data.source=recall writes each symbol as one character: use tokenizer=char"
    ):
        check_recall_run(data, TokenizerConfig(kind="byte"), "causal_lm")
    with pytest.raises(ConfigError, match=r"^data.source=recall trains task=causal_lm, not task=masked_lm$"):
        check_recall_run(data, TokenizerConfig(kind="char"), "masked_lm")


@pytest.mark.parametrize("loss", ["answers", "all"])
def test_each_training_window_is_one_whole_sequence(tmp_path, loss):
    data = dict(
        source="recall",
        seq_len=33,
        recall_vocab=32,
        recall_pairs=4,
        recall_examples=60,
        recall_loss=loss,
        cache_dir=str(tmp_path),
    )
    dm = ZooDataModule(data, {"kind": "char", "cache_dir": str(tmp_path)}, "causal_lm", batch_size=4)
    dm.setup()
    tok = dm.tokenizer
    assert tok.vocab_size == 6 + 32  # the specials, then one id per symbol
    drawn = draw(recall_spec(dm.data_cfg), 60, seed=0)
    where = {as_text(row): i for i, row in enumerate(drawn.symbols)}
    for loader in (dm.train_dataloader(), dm.val_dataloader()):
        batch = next(iter(loader))
        assert batch["input_ids"].shape[1] == 33
        for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist()):
            assert ids[-1] == tok.eos_id  # a sequence and its eos
            row = where[tok.decode(ids[:-1])]
            if loss == "all":
                assert labels[:-1] == ids[1:]  # every position predicts the next symbol
                continue
            kept = {t: y for t, y in enumerate(labels) if y != IGNORE_INDEX}
            queries = {int(q) for q in drawn.queries[row]}
            assert queries <= set(kept)  # every query, and only repeats of a pair beside them
            for t, y in kept.items():
                assert y == ids[t + 1] and (ids[t], y) in set(zip(ids[0:8:2], ids[1:8:2]))
    assert all(ord(c) - SYMBOL_BASE in range(32) for c in tok.decode(batch["input_ids"][0].tolist()))
