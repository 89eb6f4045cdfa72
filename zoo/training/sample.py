"""A greedy continuation of a fixed prompt, reported in a causal-LM run's summary."""

from __future__ import annotations

from zoo.config.positions import max_positions
from zoo.models.generate import generate
from zoo.data.prompts import continue_text

SAMPLE_PROMPT = "And God said"


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
    out = generate(task.model, ids, max_new_tokens=max_new_tokens, eos_id=tokenizer.special_ids()["eos"],
                   vocab_limit=tokenizer.vocab_size)
    task.train(was_training)
    return continue_text(tokenizer, prompt, out[0].tolist())
