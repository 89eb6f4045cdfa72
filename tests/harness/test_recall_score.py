"""The associative-recall probe's score: a model that looks the answers up scores 1 at every
pair count and distance; one that guesses a value at random scores chance, inside the interval;
one that answers only near keys fails far ones; the symbols' ids come from the tokenizer, which
must give each its own; and the table and CSV carry every row."""

from __future__ import annotations

import csv
import io
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from zoo.config.errors import ConfigError
from zoo.config.schema.recall import RecallSpec
from zoo.data.recall import alphabet
from zoo.data.tokenizers.byte import ByteTokenizer
from zoo.data.tokenizers.char import CharTokenizer
from zoo.harness.recall import CSV_COLUMNS, check_pairs, csv_text, score, symbol_ids, table

SPEC = RecallSpec(vocab_size=32, seq_len=64, num_kv_pairs=4)
V = 6 + SPEC.vocab_size  # a char tokenizer's ids: the specials, then the symbols
IDS = np.arange(6, V)


class LookUp(torch.nn.Module):
    """Answers by the rule: at a key of the first `pairs` pairs seen again later (within
    `reach` positions), the id after its first occurrence; elsewhere id 0."""

    def __init__(self, pairs: int, reach: int | None = None):
        super().__init__()
        self.pairs, self.reach = pairs, reach

    def forward(self, input_ids):
        B, T = input_ids.shape
        logits = torch.zeros(B, T, V)  # (B, T, V)
        logits[:, :, 0] = 1.0
        for b in range(B):
            first = {}
            for t in range(0, 2 * self.pairs, 2):
                first.setdefault(int(input_ids[b, t]), t)
            for t in range(2 * self.pairs, T):
                at = first.get(int(input_ids[b, t]))
                if at is not None and (self.reach is None or t - at < self.reach):
                    logits[b, t, input_ids[b, at + 1]] = 2.0
        return SimpleNamespace(logits=logits)


class Guess(torch.nn.Module):
    """Knows which ids are values, not which goes with which key: a value at random."""

    def __init__(self, seed: int):
        super().__init__()
        self.gen = torch.Generator().manual_seed(seed)

    def forward(self, input_ids):
        B, T = input_ids.shape
        logits = torch.full((B, T, V), -1.0)  # (B, T, V)
        values = torch.as_tensor(IDS[SPEC.vocab_size // 2 :])
        logits[:, :, values] = torch.rand(B, T, len(values), generator=self.gen)
        return SimpleNamespace(logits=logits)


def _all_rows(result):
    return [r for r in result["rows"] if r["distance"] == "all"]


def test_a_model_that_looks_the_answers_up_scores_one_everywhere():
    for pairs in (2, 4, 8):
        result = score(LookUp(pairs), IDS, SPEC, [pairs], examples=20, seed=0, batch_size=8)
        for row in result["rows"]:
            assert row["accuracy"] == 1.0 and row["low"] == row["high"] == 1.0 and row["queries"] > 0
        assert _all_rows(result)[0]["queries"] == 20 * pairs


def test_a_random_guess_of_a_value_scores_chance_inside_its_interval():
    result = score(Guess(seed=0), IDS, SPEC, [2, 4], examples=300, seed=5)
    assert result["chance"] == 1 / 16
    for row in _all_rows(result):
        assert row["low"] <= result["chance"] <= row["high"], row
        assert row["high"] - row["low"] < 0.06


def test_the_distance_rows_show_where_a_short_reach_fails():
    result = score(LookUp(4, reach=16), IDS, SPEC, [4], examples=100, seed=1)
    rows = {r["distance"]: r for r in result["rows"]}
    assert rows["8-15"]["accuracy"] == 1.0 and rows["32-63"]["accuracy"] == 0.0
    assert sum(r["queries"] for k, r in rows.items() if k != "all") == rows["all"]["queries"] == 400
    assert 0 < rows["all"]["accuracy"] < 1


def test_the_same_seed_scores_the_same_and_the_rows_reach_table_and_csv():
    a = score(Guess(seed=2), IDS, SPEC, [4], examples=50, seed=3)
    b = score(Guess(seed=2), IDS, SPEC, [4], examples=50, seed=3)
    assert a == b
    text = table(a)
    assert "chance 0.0625" in text.splitlines()[0] and len(text.splitlines()) == 2 + len(a["rows"])
    rows = list(csv.DictReader(io.StringIO(csv_text(a))))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == len(a["rows"])
    assert [int(r["correct"]) for r in rows] == [r["correct"] for r in a["rows"]]


def test_symbol_ids_need_one_token_each():
    chars = CharTokenizer(alphabet(SPEC))
    assert list(symbol_ids(chars, SPEC)) == list(IDS)
    with pytest.raises(ConfigError, match=r"^probe=recall needs one token of its own for each of the 32 symbols"):
        symbol_ids(ByteTokenizer(), SPEC)
    with pytest.raises(ConfigError, match="does not give them"):
        symbol_ids(CharTokenizer(alphabet(SPEC)[:20]), SPEC)  # 12 symbols unknown


def test_pairs_are_checked_against_the_spec():
    assert check_pairs(None, 4, SPEC) == [4]
    assert check_pairs("2, 4,8", 4, SPEC) == [2, 4, 8]
    with pytest.raises(ConfigError, match=r"^pairs must be pair counts >= 1, separated by commas, got '2,x'$"):
        check_pairs("2,x", 4, SPEC)
    with pytest.raises(ConfigError, match=r"^pairs=20 is more pairs than the 15 keys of data.recall_vocab=32 "):
        check_pairs("20", 4, SPEC)
    wide = RecallSpec(vocab_size=256, seq_len=64, num_kv_pairs=4)
    with pytest.raises(
        ConfigError, match=r"^pairs=20 needs sequences of 80 symbols or more .* got 64 \(data.seq_len\)"
    ):
        check_pairs("4,20", 4, wide)
