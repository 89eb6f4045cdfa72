"""Tokenizers: round trips, fixed special ids, save/load, training cache, unk."""

import os

import pytest

from zoo.config.schema.data import TokenizerConfig
from zoo.data import SPECIAL_IDS, TOKENIZERS, DataError, build_tokenizer, load_tokenizer
from zoo.data.corpora import load_pydoc

# zoo's own kinds, with fixed special ids; kind hf wraps an existing Hugging Face tokenizer
# (tests/data/test_hf_tokenizer.py)
OWN_KINDS = sorted(kind for kind in TOKENIZERS if kind != "hf")
SAMPLE = "The quick brown fox jumps over the lazy dog.\n  Indented line with  two spaces, digits 12345 and (brackets)."


@pytest.fixture(scope="module")
def corpus():
    return list(load_pydoc()["text"])


def _cfg(kind, cache, **kw):
    if kind.startswith("sentencepiece"):
        kw.setdefault("vocab_size", 1000)
    return TokenizerConfig(kind=kind, cache_dir=cache, **kw)


@pytest.mark.parametrize("kind", OWN_KINDS)
def test_round_trip_and_save_load(kind, corpus, cache, tmp_path):
    tok = build_tokenizer(_cfg(kind, cache), corpus)
    ids = tok.encode(SAMPLE)
    assert ids and all(isinstance(i, int) and 0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == SAMPLE
    assert tok.decode([tok.bos_id] + ids + [tok.eos_id, tok.pad_id]) == SAMPLE
    assert tok.decode(tok.encode(corpus[5])) == corpus[5]
    saved = tok.save(tmp_path / "run" / "tokenizer")
    again = load_tokenizer(saved)
    assert type(again) is type(tok) and again.kind == kind
    assert again.encode(SAMPLE) == ids and again.vocab_size == tok.vocab_size


@pytest.mark.parametrize("kind", OWN_KINDS)
def test_special_ids_are_fixed_and_distinct(kind, corpus, cache):
    tok = build_tokenizer(_cfg(kind, cache), corpus)
    special = tok.special_ids()
    assert special == SPECIAL_IDS
    assert set(special) == {"pad", "unk", "bos", "eos", "mask", "cls"}
    assert len(set(special.values())) == 6
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id, tok.mask_id, tok.cls_id) == (0, 1, 2, 3, 4, 5)
    assert max(special.values()) < tok.vocab_size
    assert not set(tok.encode(SAMPLE)) & {0, 2, 3, 4, 5}  # ordinary text never yields them


def test_byte_tokenizer_is_utf8():
    tok = build_tokenizer(TokenizerConfig(kind="byte"))
    assert tok.vocab_size == 262
    text = "naïve 😀"
    assert len(tok.encode(text)) == len(text.encode("utf-8"))
    assert tok.decode(tok.encode(text)) == text


def test_char_tokenizer_maps_unseen_characters_to_unk(cache):
    tok = build_tokenizer(TokenizerConfig(kind="char", cache_dir=cache), ["abc cab"])
    assert tok.vocab_size == 6 + 4  # a b c space
    ids = tok.encode("abz")
    assert ids[2] == tok.unk_id and ids[:2] == tok.encode("ab")
    assert tok.decode(ids) == "ab\ufffd"


@pytest.mark.parametrize("kind", ["sentencepiece_bpe", "sentencepiece_unigram", "char"])
def test_second_build_reuses_the_cache(kind, corpus, cache):
    first = build_tokenizer(_cfg(kind, cache), corpus)
    assert not first.from_cache
    (entry,) = [p for p in os.scandir(os.path.join(cache, "tokenizers")) if p.is_dir()]
    files = {f.name: os.stat(f.path).st_mtime_ns for f in os.scandir(entry.path)}
    second = build_tokenizer(_cfg(kind, cache), corpus)
    assert second.from_cache
    assert {f.name: os.stat(f.path).st_mtime_ns for f in os.scandir(entry.path)} == files
    assert second.encode(SAMPLE) == first.encode(SAMPLE)
    other = build_tokenizer(_cfg(kind, cache), corpus[:-1])  # other text -> trained anew
    assert not other.from_cache
    assert len(os.listdir(os.path.join(cache, "tokenizers"))) == 2


@pytest.mark.parametrize("kind", ["sentencepiece_bpe", "sentencepiece_unigram"])
def test_sentencepiece_keeps_newlines_tabs_and_spaces(kind, corpus, cache):
    tok = build_tokenizer(_cfg(kind, cache), corpus)
    text = "def f(x):\n\treturn  x\n\n  end "
    assert tok.decode(tok.encode(text)) == text


def test_sentencepiece_vocab_is_a_soft_limit_on_small_text(cache):
    tok = build_tokenizer(
        _cfg("sentencepiece_unigram", cache, vocab_size=5000), ["a tiny corpus of a few words", "a few more words"]
    )
    assert 6 < tok.vocab_size < 5000
    assert tok.decode(tok.encode("a few words")) == "a few words"


def test_sentencepiece_vocab_too_small_for_the_characters(corpus, cache):
    with pytest.raises(DataError, match=r"tokenizer.vocab_size=20 is too small.*need \d+"):
        build_tokenizer(_cfg("sentencepiece_bpe", cache, vocab_size=20), corpus)


@pytest.mark.parametrize("kind", ["char", "sentencepiece_bpe"])
def test_empty_training_text(kind, cache):
    with pytest.raises(DataError, match="training text is empty"):
        build_tokenizer(_cfg(kind, cache), ["", "   "] if kind != "char" else [""])


def test_load_from_a_directory_without_tokenizer(tmp_path):
    with pytest.raises(DataError, match="tokenizer.json is missing"):
        load_tokenizer(tmp_path)


RACE = """
import sys
from zoo.config.schema.data import TokenizerConfig
from zoo.data.corpora import load_pydoc
from zoo.data.tokenizers import build_tokenizer
texts = list(load_pydoc()["text"])
tok = build_tokenizer(TokenizerConfig(kind="sentencepiece_bpe", vocab_size=1000, cache_dir=sys.argv[1]), texts)
print("cache" if tok.from_cache else "trained")
"""


@pytest.mark.slow
def test_processes_started_together_train_the_tokenizer_once(cache):
    """Two ranks of a torchrun / srun job build the same tokenizer at the same moment: one
    trains it, the other waits for the cache instead of training it again."""
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", RACE, cache], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = sorted(p.communicate(timeout=300)[0].strip() for p in procs)
    assert all(p.returncode == 0 for p in procs)
    assert outputs == ["cache", "trained"]
