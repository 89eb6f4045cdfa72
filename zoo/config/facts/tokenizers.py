"""Facts about each tokenizer kind (`tokenizer.kind`), in one torch-free table: what it is,
where it comes from, the `TokenizerConfig` keys it reads and whether it learns its vocabulary
from the training split. `TokenizerConfig` (`zoo.config.schema.data`) refuses a key the chosen
kind does not read from these rows; the tokenizers live in `zoo.data.tokenizers`, built by
`zoo.data.tokenizers.registry` for the same enum."""

from __future__ import annotations

from dataclasses import dataclass

from zoo.config.choice import Choice


class TokenizerKind(Choice):
    byte = "byte"  # UTF-8 bytes: 256 ids + specials, nothing to train
    char = "char"  # the characters of the training split + specials
    sentencepiece_bpe = "sentencepiece_bpe"  # Sennrich et al. 2016, via SentencePiece
    sentencepiece_unigram = "sentencepiece_unigram"  # Kudo 2018, via SentencePiece
    hf = "hf"  # a Hugging Face tokenizer directory (save_pretrained), e.g. a pretrained model's


SENTENCEPIECE_PARAMS = ("vocab_size", "character_coverage", "byte_fallback", "max_sentences")


@dataclass(frozen=True)
class TokenizerFacts:
    """One tokenizer kind's row.

    - `what`, `paper`: what it does and where it comes from.
    - `params`: the `TokenizerConfig` keys it reads besides `kind`; another kind's key set away
      from its default is refused, so `tokenizer=byte tokenizer.vocab_size=512` does not
      silently do nothing.
    - `trains`: it learns its vocabulary from the training split (zoo-prepare and the first run
      train it); otherwise it is fixed (bytes) or loaded (a Hugging Face directory).
    """

    what: str
    paper: str
    params: tuple[str, ...] = ()
    trains: bool = False

    def __post_init__(self) -> None:
        if not self.what:
            raise ValueError("a tokenizer row says what it does")


TOKENIZER_FACTS: dict[TokenizerKind, TokenizerFacts] = {
    TokenizerKind.byte: TokenizerFacts(what="UTF-8 bytes: 256 ids after the specials", paper="Xue et al. 2022 (ByT5)"),
    TokenizerKind.char: TokenizerFacts(
        what="one id per character of the training split, after the specials", paper="character-level LMs", trains=True
    ),
    TokenizerKind.sentencepiece_bpe: TokenizerFacts(
        what="byte-pair merges, via SentencePiece",
        paper="Sennrich et al. 2016; Kudo & Richardson 2018",
        params=SENTENCEPIECE_PARAMS,
        trains=True,
    ),
    TokenizerKind.sentencepiece_unigram: TokenizerFacts(
        what="a unigram language model over pieces, via SentencePiece",
        paper="Kudo 2018",
        params=SENTENCEPIECE_PARAMS,
        trains=True,
    ),
    TokenizerKind.hf: TokenizerFacts(
        what="a Hugging Face tokenizer directory (save_pretrained), loaded offline with its own special ids",
        paper="transformers' AutoTokenizer",
        params=("path",),
    ),
}


def tokenizer_readers(param: str) -> tuple[TokenizerKind, ...]:
    """The tokenizer kinds that read `TokenizerConfig` key `param`."""
    return tuple(kind for kind, facts in TOKENIZER_FACTS.items() if param in facts.params)


__all__ = ["TOKENIZER_FACTS", "TokenizerFacts", "TokenizerKind", "tokenizer_readers"]
