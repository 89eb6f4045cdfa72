"""zoo-bench measure=decode: batch-1 greedy cached decoding by context length. At each prompt
length L of `contexts`, for each model: the tokens/s of the decoding steps after the prompt
(timed within `zoo.models.generate` from its first new token on, so the prefill is timed apart),
the prefill's seconds, the decoding cache's bytes once L + new_tokens - 1 positions are in it
(counted in the cache object: the attention layers' keys and values, the recurrent layers'
states) beside `zoo.models.limits.kv_cache_bytes`' torch-free count, and the peak memory growth
of one decoding. Every (model, L) runs once per round, interleaved, medians over rounds."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial

import torch

from zoo.bench.memory import PeakRSS, _rss_bytes
from zoo.bench.timing import interleaved, median, spread, synchronize
from zoo.models.base import ZooModel
from zoo.models.generate import GenerationConfig, generate
from zoo.models.limits import kv_cache_bytes
from zoo.nn.cache import Cache


def cache_bytes(cache: Cache) -> int:
    """The bytes a decoding cache holds for the positions it has seen: each attention layer's
    keys and values (the first `length` positions of its storage, which grows by doubling),
    each recurrent layer's state, and cross-attention's keys and values. Positions and unused
    capacity are not counted (`kv_cache_bytes` counts neither). A sliding layer's growing cache
    keeps window - 1 positions between steps, one less than `kv_cache_bytes` counts (the window a
    step attends, what a static cache allocates)."""
    total = cache.state_bytes()
    for layer in cache.layers:
        held = [layer.self_attn.k, layer.self_attn.v] if layer.state is None else []
        held += list(layer.cross_kv or ())
        total += sum(t.numel() * t.element_size() for t in held if t is not None)
    return total


@torch.no_grad()
def cached_decoding(model: ZooModel, prompt: torch.Tensor, new_tokens: int) -> tuple[torch.Tensor, Cache]:
    """Greedy decoding of a decoder-only model step by step with its growing cache, as
    `zoo.models.generate` decodes: (new tokens (B, N), the cache after the last step, which has
    seen the prompt and every new token but the last)."""
    model.eval()
    cache = model.new_cache()
    out = model(prompt, cache=cache, use_cache=True, return_logits=False)
    logits = model.logits(out.hidden_states[:, -1:])[:, 0]  # (B, V)
    tokens = [logits.argmax(-1)]
    for _ in range(new_tokens - 1):
        out = model(tokens[-1][:, None], cache=out.cache, use_cache=True)
        tokens.append(out.logits[:, -1].argmax(-1))
    assert out.cache is not None  # use_cache=True
    return torch.stack(tokens, dim=1), out.cache  # (B, N)


def decode_seconds(
    model: ZooModel, prompt: torch.Tensor, new_tokens: int, config: GenerationConfig, prefill: list[float]
) -> float:
    """Seconds per new token of the decoding steps after the first new token, of one
    `generate` call; the seconds up to the first new token (the prefill) are appended to `prefill`."""
    device = prompt.device
    first: list[float] = []

    def on_step(_tokens: torch.Tensor | None) -> None:
        if not first:
            synchronize(device)
            first.append(time.perf_counter())

    synchronize(device)
    start = time.perf_counter()
    out = generate(model, prompt, config=config, max_new_tokens=new_tokens, on_step=on_step)
    synchronize(device)
    end = time.perf_counter()
    if out.shape[1] != new_tokens:
        raise RuntimeError(f"decoding gave {out.shape[1]} tokens, not {new_tokens}")
    prefill.append(first[0] - start)
    return (end - first[0]) / (new_tokens - 1)


def memory_growth(model: ZooModel, prompt: torch.Tensor, new_tokens: int) -> tuple[int, int, str]:
    """One decoding step by step (`cached_decoding`): (the cache's bytes, the peak memory above
    what was held before it, what that peak is). On CPU the peak RSS, a lower bound inside a
    process that has freed memory its allocator reuses; on CUDA max allocated."""
    device = prompt.device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        _, cache = cached_decoding(model, prompt, new_tokens)
        torch.cuda.synchronize(device)
        return cache_bytes(cache), torch.cuda.max_memory_allocated(device) - before, "cuda max allocated"
    before = _rss_bytes()
    with PeakRSS() as rss:
        _, cache = cached_decoding(model, prompt, new_tokens)
    return cache_bytes(cache), max(rss.peak - before, 0), "peak RSS growth"


def decode_by_context(
    models: Mapping[str, ZooModel],
    *,
    contexts: list[int],
    new_tokens: int,
    rounds: int,
    seed: int = 1,
    configs: Mapping[str, GenerationConfig] | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, list[dict]]:
    """The figures of every model at every context (see the module docstring): name -> one dict
    per context, in the order of `contexts`. The models share one prompt per context (random
    ids below the smallest vocabulary, `seed`); `configs` gives a model its generation options
    (default: greedy, growing cache)."""
    vocab = min(m.config.vocab_size for m in models.values())
    g = torch.Generator().manual_seed(seed)
    prompts = {L: torch.randint(8, vocab, (1, L), generator=g) for L in contexts}
    prefill: dict[tuple[str, int], list[float]] = {}
    timers: dict[tuple[str, int], Callable[[], float]] = {}
    for name, model in models.items():
        config = (configs or {}).get(name, GenerationConfig())
        for L in contexts:
            prefill[(name, L)] = []
            prompt = prompts[L].to(model.device)
            timers[(name, L)] = partial(decode_seconds, model, prompt, new_tokens, config, prefill[(name, L)])
    log(f"decode: {len(models)} models x {len(contexts)} contexts x {rounds} rounds")
    seconds = interleaved(timers, rounds=rounds, warmup=1)
    out: dict[str, list[dict]] = {name: [] for name in models}
    for (name, L), values in seconds.items():
        model = models[name]
        prompt = prompts[L].to(model.device)
        held, growth, kind = memory_growth(model, prompt, new_tokens)
        itemsize = next(model.parameters()).element_size()
        out[name].append(
            {
                "context": L,
                "new_tokens": new_tokens,
                "decode_tokens_per_s": 1 / median(values),
                "decode_spread": spread(values),
                "prefill_ms": 1e3 * median(prefill[(name, L)][1:]),  # the warm-up's left out
                "cache_bytes": held,
                "cache_bytes_counted": kv_cache_bytes(model.config, 1, L, new_tokens, itemsize),
                "memory_growth_bytes": growth,
                "memory_kind": kind,
            }
        )
    return out
