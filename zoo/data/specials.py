"""The refusal when the tokenizer lacks a special token the task needs (the `specials` of its
row in `zoo.config.facts.tasks.TASK_SPECS`).

zoo's own tokenizers have all six; a Hugging Face tokenizer (kind hf) may not: a GPT-2 or
Llama tokenizer has no mask token, a T5 tokenizer no cls, ... Checked once the tokenizer
exists, before anything is tokenized."""

from __future__ import annotations

from zoo.config.facts.tasks import TaskKind, task_spec
from zoo.data.errors import DataError


def require_specials(tokenizer, task: TaskKind | str) -> None:
    """DataError naming the first special token `task` needs (its row's `specials` in
    `zoo.config.facts.tasks.TASK_SPECS`) that `tokenizer` lacks."""
    spec = task_spec(task)
    ids = tokenizer.special_ids()
    for special in spec.specials:
        name = special.name
        if ids.get(name) is None:
            where = f" at {tokenizer.path}" if getattr(tokenizer, "path", None) else ""
            article = "an" if name[0] in "aeiou" else "a"
            raise DataError(
                f"task={spec.kind.value} needs {article} {name} token ({special.why}), but the "
                f"{tokenizer.kind} tokenizer{where} has none"
            )
