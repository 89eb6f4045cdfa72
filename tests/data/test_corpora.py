"""Built-in corpora are real text, read offline."""

import pytest

from zoo.config.facts.corpora import CORPUS_ROWS
from zoo.config.schema.data import DataConfig
from zoo.data.corpora import CORPORA, english, load_kjv, load_numbers, load_pydoc, load_testament, load_unicode, spanish
from zoo.data.sources import load_splits


def test_kjv_is_the_whole_bible_in_order():
    ds = load_kjv()
    assert len(ds) == 31102
    assert ds[0]["text"] == "In the beginning God created the heaven and the earth."
    assert (ds[0]["book"], ds[0]["chapter"], ds[0]["verse"]) == ("Genesis", 1, 1)
    last = ds[-1]
    assert last["book"] == "Revelation" and last["text"].endswith("Amen.")
    assert not any(t[:1].isdigit() for t in ds["text"][:500])  # verse numbers stripped
    assert sum(len(t) for t in ds["text"]) > 4_000_000


@pytest.mark.slow
def test_testament_labels_follow_the_books():
    ds = load_testament()
    assert ds.column_names == ["text", "label"]
    labels = ds["label"]
    assert set(labels) == {"old", "new"}
    assert labels.count("old") == 23145 and labels.count("new") == 7957
    kjv = load_kjv()
    matthew = kjv["book"].index("Matthew")
    assert labels[matthew - 1] == "old" and labels[matthew] == "new"


def test_pydoc_topics_are_documentation():
    ds = load_pydoc()
    assert len(ds) > 50
    topics = dict(zip(ds["topic"], ds["text"]))
    assert "assert" in topics["assert"]
    assert sum(map(len, ds["text"])) > 100_000


def test_numbers_known_values():
    assert (english(121), spanish(121)) == ("one hundred twenty-one", "ciento veintiuno")
    assert (english(21), spanish(21)) == ("twenty-one", "veintiuno")
    assert (english(100), spanish(100)) == ("one hundred", "cien")
    assert spanish(2024) == "dos mil veinticuatro"
    ds = load_numbers(200)
    assert ds[121] == {"source": "one hundred twenty-one", "target": "ciento veintiuno", "n": 121}
    assert len(set(ds["source"])) == len(set(ds["target"])) == 200


def test_numbers_validation_phrases_never_in_training():
    cfg = DataConfig(source="numbers", num_pairs=3000, val_fraction=0.1, text_column="source")
    splits = load_splits(cfg)
    train, val = splits["train"], splits["validation"]
    assert len(train) + len(val) == 3000 and len(val) == 300
    assert not set(train["source"]) & set(val["source"])
    assert not set(train["target"]) & set(val["target"])
    again = load_splits(cfg)
    assert again["validation"]["n"] == val["n"]


def test_unicode_names_are_labelled_by_their_category():
    ds = load_unicode()
    assert ds.column_names == ["text", "label"]
    labels = dict(zip(ds["text"], ds["label"]))
    assert labels["LATIN SMALL LETTER A"] == "letter" and labels["DIGIT SEVEN"] == "number"
    assert labels["EM DASH"] == "punctuation" and labels["SPACE"] == "separator"
    assert labels["COMBINING ACUTE ACCENT"] == "mark" and labels["PLUS SIGN"] == "symbol"
    assert not any(name.startswith(("CJK UNIFIED IDEOGRAPH-", "HANGUL SYLLABLE ")) for name in labels)
    assert len(ds) > 20_000 and 0.5 < ds["label"].count("letter") / len(ds) < 0.7


def test_every_corpus_is_registered():
    assert set(CORPORA) == {row.name for row in CORPUS_ROWS}
