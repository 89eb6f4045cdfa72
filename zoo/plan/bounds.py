"""The sizes a plan can be made for, checked before anything is simulated (torch-free, so a
refusal answers before torch loads).

A plan runs one device's step on fake tensors layer by layer, several times while it searches
for the largest micro-batch: its time grows with the layers (about a second each on a laptop),
so they are bounded. Widths, lengths and the micro-batch are bounded so that no tensor of the
step has more elements than torch's sizes hold (a model.d_model of 10^11 or a batch of 10^20
would otherwise end in torch's overflow error). The bounds are far above any model trained
today: 128 layers (GPT-3 has 96, Llama 3 405B 126), widths and lengths of 2^24."""

from __future__ import annotations

from zoo.config.errors import ConfigError
from zoo.config.facts.kv import LATENT_PARAMS
from zoo.config.schema.model import ModelConfig
from zoo.config.schema.params import stack_layers

MAX_LAYERS = 128  # in all stacks together (encoder and decoder)
MAX_BATCH = 2**16  # the micro-batch (also the largest one the search tries)
MAX_WIDTH = 2**24  # model.d_model, model.d_ff, model.vocab_size, heads x head_dim, the latent widths
MAX_LENGTH = 2**24  # seq_len and model.max_seq_len
MAX_ELEMENTS = 2**60  # of one tensor: below torch's int64 byte count at 8 bytes an element


def check_batch(batch: int) -> None:
    if batch > MAX_BATCH:
        raise ConfigError(f"batch={batch}: zoo-plan plans micro-batches of up to {MAX_BATCH:,} rows")


def planned_seq_len(model: ModelConfig, seq_len: int | None, batch: int) -> int:
    """The tokens per row a plan is made for (`seq_len`, default model.max_seq_len), with the
    model's and the step's sizes checked (`check_model_sizes`)."""
    planned = seq_len or model.max_seq_len
    if planned > model.max_seq_len:
        raise ConfigError(
            f"seq_len={planned} is longer than model.max_seq_len={model.max_seq_len}: lower seq_len "
            f"or raise model.max_seq_len={planned}"
        )
    check_model_sizes(model, planned, batch)
    return planned


def check_model_sizes(model: ModelConfig, seq_len: int, batch: int) -> None:
    """Refuse, naming the key, a model or step too large to plan (see the module's text)."""
    layers = sum(n for n, _ in stack_layers(model))
    if layers > MAX_LAYERS:
        key = "model.n_layers" if model.n_decoder_layers is None else "model.n_layers + model.n_decoder_layers"
        raise ConfigError(
            f"{key}={layers}: zoo-plan runs each layer of the step (about a second each, several "
            f"times over) and plans up to {MAX_LAYERS} layers in all"
        )
    widths = {
        "model.d_model": model.d_model,
        "model.d_ff": model.d_ff or 0,
        "model.vocab_size": model.vocab_size,
        "model.n_heads x model.head_dim": model.n_heads * (model.head_dim or 0),
    }
    # model.kv=latent: the latents and each head's expanded keys and values
    widths.update({f"model.{name}": getattr(model, name) or 0 for name in LATENT_PARAMS})
    expanded = (model.qk_nope_head_dim or 0) + (model.qk_rope_head_dim or 0) + (model.v_head_dim or 0)
    widths["model.n_heads x (model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim)"] = (
        model.n_heads * expanded
    )
    for key, value in widths.items():
        if value > MAX_WIDTH:
            raise ConfigError(f"{key}={value}: zoo-plan plans widths of up to {MAX_WIDTH:,}")
    if model.max_seq_len > MAX_LENGTH:
        raise ConfigError(f"model.max_seq_len={model.max_seq_len}: zoo-plan plans up to {MAX_LENGTH:,} positions")
    check_batch(batch)
    products = {
        "batch x seq_len x model.vocab_size (the logits)": batch * seq_len * model.vocab_size,
        "batch x model.n_heads x seq_len^2 (the attention scores)": batch * model.n_heads * seq_len**2,
    }
    for what, n in products.items():
        if n > MAX_ELEMENTS:
            raise ConfigError(
                f"{what} = {n:,} elements: more than one tensor holds ({MAX_ELEMENTS:,}); lower batch or seq_len"
            )
