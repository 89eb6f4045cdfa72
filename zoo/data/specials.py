"""Which special tokens each task shape uses, and the refusal when the tokenizer lacks one.

zoo's own tokenizers have all six; a Hugging Face tokenizer (kind hf) may not: a GPT-2 or
Llama tokenizer has no mask token, a T5 tokenizer no cls, ... Checked once the tokenizer
exists, before anything is tokenized."""

from __future__ import annotations

from zoo.config.data import TaskShape
from zoo.data.errors import DataError

# task shape -> (special, what it is for)
NEEDED: dict[TaskShape, tuple[tuple[str, str], ...]] = {
    TaskShape.causal_lm: (("eos", "it ends each document in the packed blocks"),),
    TaskShape.masked_lm: (("mask", "it replaces the tokens to predict"),
                          ("eos", "it ends each document in the packed blocks")),
    TaskShape.seq2seq: (("bos", "the decoder starts from it"), ("eos", "it ends every source and target"),
                        ("pad", "it fills the batches")),
    TaskShape.classification: (("cls", "it starts every example and is pooled"), ("pad", "it fills the batches")),
}


def require_specials(tokenizer, task: TaskShape | str) -> None:
    """DataError naming the first special token `task` needs that `tokenizer` lacks."""
    task = TaskShape.parse(task, "task")
    ids = tokenizer.special_ids()
    for name, why in NEEDED[task]:
        if ids.get(name) is None:
            where = f" at {tokenizer.path}" if getattr(tokenizer, "path", None) else ""
            article = "an" if name[0] in "aeiou" else "a"
            raise DataError(f"task={task.value} needs {article} {name} token ({why}), but the "
                            f"{tokenizer.kind} tokenizer{where} has none")
