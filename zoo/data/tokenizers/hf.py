"""A Hugging Face tokenizer directory (written by `save_pretrained`), loaded offline with
`transformers.AutoTokenizer`: the vocabulary of a pretrained model, for fine-tuning it
(`zoo-train init_from=hf:DIR`, which sets `tokenizer=hf tokenizer.path=DIR`).

Nothing is trained. Unlike zoo's own kinds the special ids are the wrapped tokenizer's own:
- pad: pad_token, else eos (what transformers users do for models trained without padding)
- unk, mask: unk_token, mask_token
- eos: eos_token, else sep_token (BERT's [SEP] ends a segment as eos ends a document)
- bos: bos_token, else the `decoder_start_token_id` of a model config.json in the same
  directory (T5 starts its decoder with pad and has no bos); bos is the decoder's first input
- cls: cls_token, else bos_token
A token the tokenizer lacks is None; a task that needs it is refused by the data module.

`encode` adds no special tokens (zoo's collators add them), `decode` drops every special
token. `save` writes the transformers files into a subdirectory `hf/` (zoo's own meta file is
also called tokenizer.json), so a run directory rebuilds the tokenizer on its own, offline.
transformers is imported here only, when a tokenizer of this kind is built.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Iterable
from pathlib import Path

from zoo.config.errors import ConfigError
from zoo.config.records.hf_dir import check_directory_files
from zoo.data.errors import DataError
from zoo.data.tokenizers.base import Tokenizer
from zoo.data.tokenizers.decoder_pieces import piece_bytes
from zoo.data.tokenizers.manifest import inside

HF_DIR = "hf"  # the transformers files, inside a saved zoo tokenizer directory
SPECIAL_NAMES = ("pad", "unk", "bos", "eos", "mask", "cls")


def auto_tokenizer(path: str | Path):
    """`transformers.AutoTokenizer.from_pretrained(path)`, local files only; one-line errors."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ConfigError(
            "tokenizer=hf needs transformers: install the hf extra, pip install '.[hf]' in zoo's source directory"
        ) from None
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"tokenizer.path={path}: no such directory")
    check_directory_files(path, f"tokenizer.path={path}")  # no pipe to block a read, no link out
    named = names_code(path)
    if named:
        raise DataError(
            f"tokenizer.path={path}: {named} names Python code to run with the tokenizer "
            f"(auto_map); zoo runs no code from a tokenizer directory"
        )
    try:  # remote code refused, never asked about (transformers asks on a terminal when not told)
        hf = AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0].rstrip(":") if str(exc).strip() else type(exc).__name__
        raise DataError(f"tokenizer.path={path}: no Hugging Face tokenizer could be loaded from it ({first})") from None
    if not getattr(hf, "vocab_size", 0):  # a model's config.json alone gives its class with no vocabulary
        own = (
            "; zoo_tokenizer/ there is zoo's own, which transformers cannot read"
            if (path / "zoo_tokenizer").is_dir()
            else ""
        )
        raise DataError(
            f"tokenizer.path={path}: no Hugging Face tokenizer files there (transformers made a "
            f"{type(hf).__name__} with an empty vocabulary from config.json alone{own}); give a "
            "directory holding a tokenizer's files"
        )
    return hf


def names_code(directory: Path) -> str | None:
    """The file of `directory` whose `auto_map` asks transformers to import the directory's own
    Python code (tokenizer_config.json, or config.json, which AutoTokenizer also reads), if any."""
    for name in ("tokenizer_config.json", "config.json"):
        try:
            data = json.loads((directory / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("auto_map"):
            return name
    return None


def read_special_ids(hf, directory: Path) -> dict[str, int | None]:
    """The special ids zoo uses, from a transformers tokenizer (see the module docstring)."""
    own = {name: getattr(hf, f"{name}_token_id", None) for name in (*SPECIAL_NAMES, "sep")}
    eos = own["eos"] if own["eos"] is not None else own["sep"]
    bos = own["bos"] if own["bos"] is not None else _decoder_start(directory)
    return {
        "pad": own["pad"] if own["pad"] is not None else eos,
        "unk": own["unk"],
        "bos": bos,
        "eos": eos,
        "mask": own["mask"],
        "cls": own["cls"] if own["cls"] is not None else own["bos"],
    }


def _decoder_start(directory: Path) -> int | None:
    """`decoder_start_token_id` of a model config.json beside the tokenizer files, if any."""
    config = Path(directory) / "config.json"
    try:
        value = json.loads(config.read_text(encoding="utf-8")).get("decoder_start_token_id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class HFTokenizer(Tokenizer):
    """Wraps the transformers tokenizer saved in `path`. `special_ids` (as `special_ids()`
    returns them) fixes the ids instead of reading them: a saved run directory keeps the ids
    its model was trained with."""

    kind = "hf"

    def __init__(self, path: str | Path, special_ids: dict | None = None):
        self.path = Path(path)
        self._hf = auto_tokenizer(self.path)
        ids = dict(special_ids) if special_ids is not None else read_special_ids(self._hf, self.path)
        for name in SPECIAL_NAMES:
            value = ids.get(name)
            if value is not None and not 0 <= int(value) < self.vocab_size:
                raise DataError(
                    f"tokenizer.path={self.path}: the {name} id {value} is outside "
                    f"the vocabulary (0 .. {self.vocab_size - 1})"
                )
            setattr(self, f"{name}_id", None if value is None else int(value))
        self._identity_bytes: bytes | None = None

    @property
    def hf_tokenizer(self):
        """The wrapped `transformers` tokenizer."""
        return self._hf

    @property
    def vocab_size(self) -> int:
        """len(tokenizer): the base vocabulary plus added tokens."""
        return len(self._hf)

    def encode(self, text: str) -> list[int]:
        return self._hf.encode(text, add_special_tokens=False, verbose=False)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        out = self._hf(list(texts), add_special_tokens=False, return_attention_mask=False, verbose=False)
        return [list(ids) for ids in out["input_ids"]]

    def decode(self, ids: Iterable[int]) -> str:
        # ids past the vocabulary (a model whose embedding table is larger) are skipped
        kept = [i for i in map(int, ids) if 0 <= i < self.vocab_size]
        return self._hf.decode(kept, skip_special_tokens=True)

    def piece_bytes(self) -> list[bytes]:
        """Read from the vocabulary by the decoder's kind (`decoder_pieces`): exact for byte-level
        BPE and SentencePiece-style tokenizers, near the text for WordPiece."""
        special = {i for i in self.special_ids().values() if i is not None}
        return piece_bytes(self._hf, special)

    def _identity(self) -> bytes:
        """The files `save_pretrained` writes (vocabulary, merges, normalizer, added tokens)
        and the special ids; computed once."""
        if self._identity_bytes is None:
            digest = hashlib.sha256(json.dumps(self.special_ids(), sort_keys=True).encode())
            with tempfile.TemporaryDirectory() as tmp:
                self._hf.save_pretrained(tmp)
                for file in sorted(p for p in Path(tmp).rglob("*") if p.is_file()):
                    digest.update(str(file.relative_to(tmp)).encode() + b"\0" + file.read_bytes())
            self._identity_bytes = digest.digest()
        return self._identity_bytes

    def _state(self, directory: Path) -> dict:
        self._hf.save_pretrained(str(directory / HF_DIR))
        return {"path": HF_DIR}

    @classmethod
    def _from_state(cls, meta: dict, directory: Path) -> HFTokenizer:
        path = inside(directory, meta.get("path", HF_DIR), "path")
        if not path.is_dir():
            raise DataError(f"tokenizer directory {directory} lacks {path.name}/ (the transformers files)")
        return cls(path, special_ids=meta.get("special_ids"))
