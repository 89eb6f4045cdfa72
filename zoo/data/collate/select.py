"""`collate_for`: the collate function a task's row names (`TaskSpec.collate`), bound to the
tokenizer's special ids. The bound forms are classes, not closures, so DataLoader workers can
pickle them."""

from __future__ import annotations

from collections.abc import Callable

from zoo.config.facts.tasks import Collate
from zoo.data.collate.causal import DocumentCollate, collate_causal
from zoo.data.collate.classification import collate_classification
from zoo.data.collate.masked import MaskingCollator
from zoo.data.collate.seq2seq import collate_seq2seq
from zoo.data.tokenizers.base import Tokenizer


class Seq2SeqCollate:
    """`collate_seq2seq` with the tokenizer's pad, bos and eos ids."""

    def __init__(self, pad_id: int, bos_id: int, eos_id: int):
        self.ids = {"pad_id": pad_id, "bos_id": bos_id, "eos_id": eos_id}

    def __call__(self, examples):
        return collate_seq2seq(examples, **self.ids)


class ClassificationCollate:
    """`collate_classification` with the tokenizer's pad id."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, examples):
        return collate_classification(examples, pad_id=self.pad_id)


def collate_for(
    collate: Collate,
    tokenizer: Tokenizer,
    *,
    mlm_probability: float,
    seed: int,
    train: bool,
    document_mask: bool = False,
) -> Callable:
    """The collate_fn named `collate` for batches of `tokenizer`'s ids. Masked LM: training
    batches are masked anew each epoch, validation batches the same way every time
    (`MaskingCollator`), with `mlm_probability` and `seed`. Causal LM with `document_mask`:
    batches carry the documents' ids (`DocumentCollate`)."""
    collate = Collate.parse(collate, "collate")
    if document_mask and collate != Collate.causal:
        raise ValueError(f"document_mask applies to causal batches, not collate {collate.value}")
    if collate == Collate.causal:
        return DocumentCollate(tokenizer.eos_id) if document_mask else collate_causal
    if collate == Collate.masked:
        return MaskingCollator(
            tokenizer.vocab_size,
            probability=mlm_probability,
            seed=seed,
            fixed=not train,
            mask_id=tokenizer.mask_id,
            special_ids=tokenizer.special_ids().values(),
        )
    if collate == Collate.seq2seq:
        return Seq2SeqCollate(tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
    if collate == Collate.classification:
        return ClassificationCollate(tokenizer.pad_id)
    raise ValueError(f"collate {collate.value} has a member in zoo.config.facts.tasks.Collate but no branch here")
