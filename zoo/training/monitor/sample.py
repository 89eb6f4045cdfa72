"""A greedy continuation of a prompt that belongs to the corpus, reported in a causal-LM run's
summary: `data.sample_prompt`, or the first words of the validation text."""

from __future__ import annotations

from zoo.config.facts.positions import max_positions
from zoo.data.prompts import continue_text
from zoo.models.generate import generate

PROMPT_WORDS = 3


def corpus_prompt(datamodule, tokenizer, words: int = PROMPT_WORDS) -> str:
    """The first `words` whole words of the validation text ("" when there is none to read)."""
    dataset, ids = datamodule.val_dataset, []
    # packed windows share their last tokens with the next (a shifted LM's block = stride + 1)
    overlap = max(0, getattr(dataset, "block", 0) - getattr(dataset, "stride", 0))
    for i in range(8):  # a few windows: the first may end inside a word
        try:
            item = dataset[i]
        except (TypeError, IndexError, KeyError, NotImplementedError):  # the end, or a stream
            break
        window = [int(t) for t in (item["input_ids"] if isinstance(item, dict) else item)]
        ids += window[overlap if i else 0 :]
    text = tokenizer.decode(ids)
    found = text.split()
    if found and not text[-1:].isspace():
        found = found[:-1]  # the last word may be cut by the window
    return " ".join(found[:words])


def sample_prompt(spec_data, datamodule, tokenizer) -> str:
    """`data.sample_prompt` when set, else the first words of the validation text."""
    return spec_data.sample_prompt or corpus_prompt(datamodule, tokenizer)


def sample_text(task, tokenizer, prompt: str, max_new_tokens: int = 40) -> str:
    """A greedy continuation of `prompt`, to see what a causal LM has learnt."""
    import torch

    ids = torch.tensor([tokenizer.encode(prompt)], device=task.device)
    cfg = task.model_config
    bound = max_positions(cfg)
    if bound is not None:
        max_new_tokens = min(max_new_tokens, bound - ids.shape[1])
        if max_new_tokens < 1:
            return prompt
    was_training = task.training
    task.eval()
    out = generate(
        task.model,
        ids,
        max_new_tokens=max_new_tokens,
        eos_id=tokenizer.special_ids()["eos"],
        vocab_limit=tokenizer.vocab_size,
    )
    task.train(was_training)
    return continue_text(tokenizer, prompt, out[0].tolist())
