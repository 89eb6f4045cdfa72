"""Refusing decoding lengths a model cannot handle or a machine cannot hold (the inference
tools' checks before decoding)."""

from __future__ import annotations

import torch

from zoo.config.errors import ConfigError
from zoo.config.facts.attention import cache_slots, is_recurrent, layer_mixers, stack_windows, state_bytes
from zoo.config.facts.families import FAMILY_FACTS
from zoo.config.facts.kv import KV_FACTS
from zoo.config.facts.positions import max_positions
from zoo.config.schema.model import ModelConfig


def check_lengths(cfg: ModelConfig, input_len: int, max_new_tokens: int) -> None:
    """A bounded scheme's positions (learned: its table) end at model.max_seq_len: refuse what
    would run past them."""
    bound = max_positions(cfg)
    if bound is None:
        return
    kind = cfg.position.kind.value
    if FAMILY_FACTS[cfg.family].prompt_in_decoder:
        if input_len >= bound:  # not one new token fits: max_new_tokens=0 would be refused too
            raise ConfigError(
                f"the prompt ({input_len} tokens) fills the {kind} positions (model.max_seq_len={bound}) "
                f"and leaves no room for a new token: shorten it to {bound - 1} tokens at most"
            )
        if input_len + max_new_tokens > bound:
            raise ConfigError(
                f"prompt ({input_len} tokens) + max_new_tokens ({max_new_tokens}) = "
                f"{input_len + max_new_tokens} is past the {kind} positions (model.max_seq_len="
                f"{bound}): max_new_tokens={bound - input_len} is the most for this prompt"
            )
    else:
        if input_len > bound:
            raise ConfigError(
                f"the source ({input_len} tokens) is longer than the {kind} positions "
                f"(model.max_seq_len={bound}): shorten it to {bound} tokens at most"
            )
        if max_new_tokens + 1 > bound:
            raise ConfigError(
                f"max_new_tokens ({max_new_tokens}) + BOS is past the {kind} positions "
                f"(model.max_seq_len={bound}): max_new_tokens={bound - 1} is the most"
            )


def kv_cache_bytes(cfg: ModelConfig, batch: int, input_len: int, max_new_tokens: int, itemsize: int) -> int:
    """Bytes of the key/value cache for `batch` sequences (beams counted) decoding
    `max_new_tokens` after `input_len` tokens: B · T · the elements one position holds per decoder
    layer (its `model.kv` row: 2 (K, V) · Hkv · Dh per head; kv_lora_rank + qk_rope_head_dim for
    multi-head latent attention, which caches its latent),
    T = the positions fed to the decoder (the prompt, or BOS, and every new token but the last),
    plus the cross-attention keys/values of the source for an encoder-decoder. A sliding layer
    (`model.attention=sliding`) holds at most its window of positions (`cache_slots`); a recurrent
    layer (Gated DeltaNet) no keys, its fixed-size state instead (its row's `state`), the same
    at every length."""
    per_token = KV_FACTS[cfg.kv].cache(cfg) * itemsize  # one position of one self-attention layer
    cross_per_token = 2 * cfg.n_kv_heads * cfg.head_dim * itemsize  # K and V of one source position
    if FAMILY_FACTS[cfg.family].prompt_in_decoder:
        positions = input_len + max_new_tokens - 1
        windows = stack_windows(cfg, cfg.n_layers)
        attention = [w for w, kind in zip(windows, layer_mixers(cfg, cfg.n_layers)) if not is_recurrent(kind)]
        slots = sum(cache_slots(w, positions) for w in attention)
        return (slots * per_token + state_bytes(cfg, cfg.n_layers, itemsize)) * batch
    self_slots = sum(cache_slots(w, max_new_tokens) for w in stack_windows(cfg, cfg.decoder_layers))
    return (self_slots * per_token + cfg.decoder_layers * input_len * cross_per_token) * batch


def available_memory(device: torch.device) -> int | None:
    """Bytes free for new tensors on `device` (CUDA: free device memory; CPU: the kernel's
    MemAvailable); None where it cannot be told."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_memory(
    cfg: ModelConfig, batch: int, input_len: int, max_new_tokens: int, *, device: torch.device, itemsize: int
) -> None:
    """Refuse, before decoding, a request whose key/value cache alone would not fit in the
    memory `device` has free (a cache grows to this size; `static_cache` allocates it at once)."""
    need = kv_cache_bytes(cfg, batch, input_len, max_new_tokens, itemsize)
    free = available_memory(device)
    if free is not None and need > free:
        raise ConfigError(
            f"max_new_tokens={max_new_tokens} with {batch} sequence(s) of {input_len} tokens needs a "
            f"{_size(need)} key/value cache, more than the {_size(free)} free on {device.type}; "
            f"lower max_new_tokens, batch_size or num_beams"
        )


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"
