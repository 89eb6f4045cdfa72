"""The text each id of a wrapped Hugging Face tokenizer stands for (`HFTokenizer.piece_bytes`),
read from its vocabulary the way its decoder writes pieces:

- byte-level BPE (GPT-2, Radford et al. 2019; RoBERTa; Llama 3): every character of a piece
  is one byte, through GPT-2's byte <-> printable-character table;
- SentencePiece style (a Metaspace decoder, or one that replaces "▁" by a space; Llama 2, T5):
  "▁" is a space, <0xNN> a byte-fallback piece of one byte;
- WordPiece (BERT): "##" marks a piece that continues a word. The space before a word is not
  counted, and the normalizer may have lowercased the text or stripped its accents, so the
  count is near the text's bytes, not equal to them;
- any other decoder: the piece's own UTF-8 bytes.

A Metaspace tokenizer puts its space before a document only when the document does not start
with one, and its decode drops the first space either way: the ids of a document that starts
with a space stand for one byte fewer, as decode writes it.

Special tokens (the tokenizer's `all_special_ids`, added tokens marked special, and the ids zoo
uses as pad, bos, eos, ...) stand for no text; any other added token for its content.
"""

from __future__ import annotations

import json
import re

BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
WORD_BOUNDARY = "\u2581"  # "▁"
CONTINUATION = "##"  # WordPiece's mark of a piece inside a word


def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's table: printable character -> the byte it stands for. Printable Latin-1 bytes
    stand for themselves; the others, in byte order, for the characters from U+0100 on."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    code = {b: b for b in printable}
    for b in range(256):
        if b not in code:
            code[b] = 256 + len(code) - len(printable)
    return {chr(c): b for b, c in code.items()}


def decoder_types(hf) -> set[str]:
    """The types of a fast tokenizer's decoder and of its parts ({"ByteLevel"}, {"Sequence",
    "Replace", "ByteFallback", "Fuse", "Strip"}, ...); empty without one."""
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None:
        return set()
    found: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("type"), str):
                found.add(node["type"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(backend.to_str()).get("decoder"))
    return found


def piece_bytes(hf, special: set[int]) -> list[bytes]:
    """The text bytes of every id of `hf` (a transformers tokenizer), b"" for the ids in
    `special` and the tokenizer's own special tokens (see the module docstring)."""
    tokens = hf.convert_ids_to_tokens(list(range(len(hf))))
    added = dict(hf.added_tokens_decoder)
    special = set(special) | set(hf.all_special_ids)
    types = decoder_types(hf)
    alphabet = byte_level_alphabet() if "ByteLevel" in types else None
    wordpiece = "WordPiece" in types
    out = []
    for i, token in enumerate(tokens):
        if i in special or token is None:
            out.append(b"")
        elif i in added:
            out.append(b"" if added[i].special else added[i].content.encode("utf-8"))
        elif alphabet is not None and all(c in alphabet for c in token):
            out.append(bytes(alphabet[c] for c in token))
        elif (byte := BYTE_PIECE.fullmatch(token)) is not None:
            out.append(bytes([int(byte.group(1), 16)]))
        elif wordpiece:
            out.append((token[len(CONTINUATION) :] if token.startswith(CONTINUATION) else token).encode("utf-8"))
        else:
            out.append(token.replace(WORD_BOUNDARY, " ").encode("utf-8"))
    return out
