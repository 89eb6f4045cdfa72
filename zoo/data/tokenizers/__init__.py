"""Tokenizers: byte, char, SentencePiece (BPE, unigram) and wrapped Hugging Face tokenizers
(hf), one file each, behind the common `Tokenizer` interface of `base.py` and the `TOKENIZERS`
registry."""

from zoo.data.tokenizers.base import SPECIAL_IDS, SPECIAL_TOKENS, Tokenizer
from zoo.data.tokenizers.byte import ByteTokenizer
from zoo.data.tokenizers.char import CharTokenizer
from zoo.data.tokenizers.hf import HFTokenizer
from zoo.data.tokenizers.registry import TOKENIZERS, build_tokenizer, load_tokenizer
from zoo.data.tokenizers.sentencepiece import SentencePieceTokenizer
from zoo.data.tokenizers.text_bytes import TextBytes

__all__ = [
    "SPECIAL_IDS",
    "SPECIAL_TOKENS",
    "TOKENIZERS",
    "ByteTokenizer",
    "CharTokenizer",
    "HFTokenizer",
    "SentencePieceTokenizer",
    "TextBytes",
    "Tokenizer",
    "build_tokenizer",
    "load_tokenizer",
]
