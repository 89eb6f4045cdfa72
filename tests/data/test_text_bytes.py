"""Bytes of text per token id (`TextBytes`, the denominator of bits per byte): for every
tokenizer kind, the ids of a real text (King James verses and a multi-line document with
indentation, tabs and non-ASCII characters) stand for exactly its UTF-8 bytes, document by
document and over a packed stream; special tokens stand for none, unknown characters count
nothing."""

from __future__ import annotations

import numpy as np
import pytest
import transformers  # noqa: F401  (kind hf needs it: missing, these tests fail rather than skip)

from tests.interop.tiny_hf import save_tokenizer
from zoo.config.schema.data import TokenizerConfig
from zoo.data import build_tokenizer
from zoo.data.corpora.kjv import kjv_verses
from zoo.data.tokenizers import TextBytes

CODE = "  def f(x):\n\treturn {'naïve': x ** 2}  # café, 10 €\n"
KINDS = [
    "byte",
    "char",
    "sentencepiece_bpe",
    "sentencepiece_unigram",
    "sentencepiece_bpe+byte_fallback",
    "hf_byte_level",
    "hf_metaspace",
]


@pytest.fixture(scope="module")
def texts():
    """300 verses, a code-like document and one verse starting with a space."""
    verses = list(kjv_verses().texts[:300])
    return verses + [CODE, " " + verses[0]]


def save_metaspace_tokenizer(directory, texts) -> None:
    """A SentencePiece-style Hugging Face tokenizer (Metaspace: "▁" for a space, one put before
    the first word; byte fallback), as Llama 2's is, trained here with the tokenizers library."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    backend.decoder = decoders.Sequence(
        [decoders.Metaspace(prepend_scheme="first"), decoders.ByteFallback(), decoders.Fuse()]
    )
    specials = ["<unk>", "<s>", "</s>", "<pad>"]
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=specials + [f"<0x{b:02X}>" for b in range(256)], show_progress=False
    )
    backend.train_from_iterator(texts, trainer)
    # the byte pieces are ordinary vocabulary (byte fallback spells unseen characters with them)
    hf = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    hf.save_pretrained(directory)


def _build(kind: str, texts, tmp_path, cache):
    if kind == "hf_byte_level":
        save_tokenizer(tmp_path / "hf")
        return build_tokenizer(TokenizerConfig(kind="hf", path=str(tmp_path / "hf")))
    if kind == "hf_metaspace":
        save_metaspace_tokenizer(tmp_path / "hf", texts)
        return build_tokenizer(TokenizerConfig(kind="hf", path=str(tmp_path / "hf")))
    kind, _, option = kind.partition("+")
    extra = {"vocab_size": 500} if kind.startswith("sentencepiece") else {}
    if option == "byte_fallback":
        extra.update(vocab_size=600, byte_fallback=True)
    return build_tokenizer(TokenizerConfig(kind=kind, cache_dir=cache, **extra), texts)


@pytest.mark.parametrize("kind", KINDS)
def test_the_ids_of_each_document_stand_for_its_bytes(kind, texts, tmp_path, cache):
    tok = _build(kind, texts, tmp_path, cache)
    counted = TextBytes.of(tok)
    assert len(counted.lengths) == tok.vocab_size
    specials = [i for i in tok.special_ids().values() if i is not None]
    assert specials and not counted.lengths[specials].any()  # pad, unk, bos, eos, mask, cls: no text
    assert set(counted.boundaries) == {tok.bos_id, tok.eos_id}
    # SentencePiece puts a space before a document's first word, which decode drops
    assert counted.leading.any() == (kind.startswith("sentencepiece") or kind == "hf_metaspace")
    pieces = tok.piece_bytes()
    for text in texts:
        ids = tok.encode(text)
        written = tok.decode(ids).encode("utf-8")
        # a Metaspace tokenizer puts its space only before a document that starts without one,
        # and decode drops the first space either way: a leading space is lost (by decode too)
        lossy = kind == "hf_metaspace" and text.startswith(" ")
        assert written == text.encode("utf-8")[lossy:], text
        assert counted.document(ids) == len(written), text
        spelled = b"".join(pieces[i] for i in ids)  # the bytes themselves, not only their number
        assert spelled[int(counted.leading[ids[0]]) :] == written, text
    exact = [t for t in texts if not (kind == "hf_metaspace" and t.startswith(" "))]
    stream = tok.encode_documents(exact, np.int64)  # every document followed by eos
    total = sum(len(t.encode("utf-8")) for t in exact)
    assert counted.stream(stream) == total
    assert counted.stream(stream, np.bincount(stream, minlength=tok.vocab_size)) == total


@pytest.mark.parametrize(
    "kind, counted", [("char", False), ("sentencepiece_bpe", False), ("sentencepiece_bpe+byte_fallback", True)]
)
def test_unknown_characters_count_nothing_unless_spelled_in_bytes(kind, counted, texts, tmp_path, cache):
    tok = _build(kind, texts, tmp_path, cache)
    text = "And God said ☕"  # a character no training text has: unk, or three byte pieces
    missing = 0 if counted else len("☕".encode())
    assert (tok.unk_id in tok.encode(text)) != counted
    assert TextBytes.of(tok).document(tok.encode(text)) == len(text.encode("utf-8")) - missing


def test_a_stream_cut_anywhere_counts_each_documents_first_id_without_its_prefix(texts, tmp_path, cache):
    """The leading space is taken off exactly where a document begins: at the stream's start
    and after every eos, also when a document is empty (eos after eos)."""
    tok = _build("sentencepiece_unigram", texts, tmp_path, cache)
    counted = TextBytes.of(tok)
    docs = texts[:5] + ["", texts[5]]
    stream = tok.encode_documents(docs, np.int64)
    assert counted.stream(stream) == sum(len(d.encode("utf-8")) for d in docs)
    assert counted.stream(stream[1:]) == sum(len(d.encode("utf-8")) for d in docs) - counted.document(stream[:1])
