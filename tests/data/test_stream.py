"""TextStream: a continuation written token by token comes out byte for byte as the line
written at the end (`continue_text`), for every tokenizer, across characters split between
byte-level tokens and subword pieces that carry their space; and text shows before the end."""

import random

import pytest

from zoo.config.schema.data import TokenizerConfig
from zoo.data import TOKENIZERS, build_tokenizer
from zoo.data.corpora import load_pydoc
from zoo.data.prompts import continue_text
from zoo.data.stream import TextStream

OWN_KINDS = sorted(kind for kind in TOKENIZERS if kind != "hf")
PROMPT = "The quick brown"
CONTINUATIONS = [
    " fox jumps over the lazy dog.\n  Indented,  two spaces and (brackets).",
    " naïve café — 日本語 🦊 done",
]


@pytest.fixture(scope="module")
def corpus():
    return list(load_pydoc()["text"]) + CONTINUATIONS


def _tokenizer(kind, corpus, cache):
    size = {"vocab_size": 1000} if kind.startswith("sentencepiece") else {}
    return build_tokenizer(TokenizerConfig(kind=kind, cache_dir=cache, **size), corpus)


def _streamed(tokenizer, prompt, ids):
    writes = []
    specials = tokenizer.special_ids()
    stream = TextStream.continuing(tokenizer, prompt, writes.append, eos_id=specials["eos"], pad_id=specials["pad"])
    shown_before_end = []
    for token in ids:
        stream.put(token)
        shown_before_end.append("".join(writes))
    line = stream.end()
    return "".join(writes), line, shown_before_end


@pytest.mark.parametrize("kind", OWN_KINDS)
@pytest.mark.parametrize("continuation", CONTINUATIONS, ids=["ascii", "multibyte"])
def test_streamed_text_is_the_line_written_at_the_end(kind, continuation, corpus, cache):
    tokenizer = _tokenizer(kind, corpus, cache)
    ids = tokenizer.encode(continuation)
    written, line, before = _streamed(tokenizer, PROMPT, ids)
    expected = continue_text(tokenizer, PROMPT, ids)
    assert line == expected and written == expected + "\n"
    # text shows while decoding goes on: well before the end, most of the line is out
    assert len(before[len(ids) // 2]) > len(PROMPT)
    assert len(before[-1]) >= len(expected) - len(continuation.split()[-1]) - 1


@pytest.mark.parametrize("kind", OWN_KINDS)
def test_the_end_token_ends_the_line_and_pads_are_dropped(kind, corpus, cache):
    tokenizer = _tokenizer(kind, corpus, cache)
    specials = tokenizer.special_ids()
    head, tail = tokenizer.encode(" fox jumps"), tokenizer.encode(" over the dog")
    ids = head[:1] + [specials["pad"]] + head[1:] + [specials["eos"]] + tail
    written, line, _ = _streamed(tokenizer, PROMPT, ids)
    assert line == continue_text(tokenizer, PROMPT, head) and written == line + "\n"


def test_random_bytes_stream_as_they_decode(cache):
    """Byte-level tokens cut characters anywhere: random bytes, valid or not, stream to the same
    text as decoding them all at once."""
    tokenizer = build_tokenizer(TokenizerConfig(kind="byte", cache_dir=cache))
    specials = tokenizer.special_ids()
    byte_ids = [tokenizer.encode(bytes([b]).decode("latin-1"))[0] for b in range(0x20, 0x7F)]
    encoded = tokenizer.encode("日本語🦊é")
    rng = random.Random(0)
    for _ in range(50):
        ids = [
            rng.choice(byte_ids + encoded + [i for i in range(tokenizer.vocab_size) if i not in specials.values()])
            for _ in range(rng.randint(1, 30))
        ]
        written, line, _ = _streamed(tokenizer, "p", ids)
        assert line == continue_text(tokenizer, "p", ids) and written == line + "\n", ids


def test_text_a_tokenizer_rewrites_is_written_again_whole():
    """Should decoding change text already shown, the line is written again on its own line,
    so the last line is always the right one."""
    pieces = {1: "a ", 2: "b", 3: "."}

    def decode(ids):  # joins " ." as cleanup of tokenization spaces does, after the space was shown
        return "".join(pieces[i] for i in ids).replace("b .", "b.").replace("a b", "A b")

    writes = []
    stream = TextStream(decode, writes.append, prefix=">", eos_id=None, pad_id=0)
    for token in (1, 2, 3):
        stream.put(token)
    assert stream.end() == ">A b."
    assert "".join(writes).splitlines()[-1] == ">A b."
