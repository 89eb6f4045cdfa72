"""The widths a model config derives when left out, one rule each (and μP's base widths): n_kv_heads (= n_heads),
head_dim (d_model / n_heads), n_decoder_layers (= n_layers, encoder-decoder only) and d_ff
(model.ff_mult · d_model, or the d_ff model.param_budget sizes, or 4·D for a plain unit and
8·D/3 rounded up to a multiple of 64 for a gated one), each checked with the numbers that make it
impossible. Called by `ModelConfig.__post_init__`. Nothing here imports torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zoo.config.errors import ConfigError
from zoo.config.facts.activations import GATED
from zoo.config.facts.families import FAMILY_FACTS
from zoo.config.facts.positions import check_even
from zoo.config.schema.choices import Parametrization
from zoo.config.schema.frozen import settle

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig

MUP_BASE_D_MODEL = 128  # the base width of model.parametrization=mup unless model.mup_base_d_model sets it


def positive(name: str, value) -> None:
    """model.NAME is a positive integer (a bool is not), else one line."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"model.{name} must be a positive integer, got {value!r}")


def round_up(n: int, multiple: int) -> int:
    return ((n + multiple - 1) // multiple) * multiple


def derive_heads(cfg: ModelConfig) -> None:
    """Check the sizes and fill in n_kv_heads, head_dim and n_decoder_layers (kinds parsed)."""
    for name in ("d_model", "n_heads", "n_layers", "vocab_size", "max_seq_len"):
        positive(name, getattr(cfg, name))
    if cfg.n_kv_heads is None:
        settle(cfg, "n_kv_heads", cfg.n_heads)
    positive("n_kv_heads", cfg.n_kv_heads)
    if cfg.n_heads % cfg.n_kv_heads:
        raise ConfigError(
            f"model.n_heads ({cfg.n_heads}) must be divisible by model.n_kv_heads "
            f"({cfg.n_kv_heads}) for grouped-query attention"
        )
    if cfg.head_dim is None:
        if cfg.d_model % cfg.n_heads:
            raise ConfigError(
                f"model.d_model ({cfg.d_model}) must be divisible by model.n_heads "
                f"({cfg.n_heads}), or set model.head_dim"
            )
        settle(cfg, "head_dim", cfg.d_model // cfg.n_heads)
    positive("head_dim", cfg.head_dim)
    check_even(cfg)
    if FAMILY_FACTS[cfg.family].cross_attention:
        if cfg.n_decoder_layers is None:
            settle(cfg, "n_decoder_layers", cfg.n_layers)
        positive("n_decoder_layers", cfg.n_decoder_layers)
    elif cfg.n_decoder_layers is not None:
        raise ConfigError(
            f"model.n_decoder_layers only applies to model.family=encoder_decoder, not {cfg.family.value}"
        )


def derive_d_ff(cfg: ModelConfig) -> None:
    """Fill in d_ff: from model.ff_mult, from model.param_budget, or the unit's default."""
    if cfg.ff_mult is not None:
        if isinstance(cfg.ff_mult, bool) or not cfg.ff_mult > 0:
            raise ConfigError(f"model.ff_mult must be > 0, got {cfg.ff_mult!r}")
        sized = max(1, round(cfg.ff_mult * cfg.d_model))
        # a config read back from a run holds the d_ff it resolved to: the same, so no conflict
        for other, agrees in (("d_ff", cfg.d_ff in (None, sized)), ("param_budget", cfg.param_budget is None)):
            if not agrees:
                raise ConfigError(
                    f"model.ff_mult={cfg.ff_mult:g} and model.{other}={getattr(cfg, other)} "
                    f"both size the feed-forward unit; set one of them"
                )
        settle(cfg, "d_ff", sized)
    if cfg.param_budget is not None:
        positive("param_budget", cfg.param_budget)
        from zoo.config.schema.params import d_ff_for_budget  # lazy: it reads the model schema's enums

        sized = d_ff_for_budget(cfg, cfg.param_budget)
        if cfg.d_ff is not None and cfg.d_ff != sized:
            raise ConfigError(
                f"model.d_ff={cfg.d_ff} conflicts with model.param_budget={cfg.param_budget:,} "
                f"(which sizes d_ff to {sized}); set one of them"
            )
        settle(cfg, "d_ff", sized)
    if cfg.d_ff is None:
        if cfg.activation in GATED:
            settle(cfg, "d_ff", round_up(int(8 * cfg.d_model / 3), 64))
        else:
            settle(cfg, "d_ff", 4 * cfg.d_model)
    positive("d_ff", cfg.d_ff)


def derive_base_widths(cfg: ModelConfig) -> None:
    """The base widths belong to mup; under mup, the base width defaults to MUP_BASE_D_MODEL."""
    if cfg.parametrization == Parametrization.standard:
        for name in ("mup_base_d_model", "mup_base_head_dim"):
            if getattr(cfg, name) is not None:
                raise ConfigError(
                    f"model.{name}={getattr(cfg, name)!r} only applies to model.parametrization=mup, not standard"
                )
        return
    if cfg.mup_base_d_model is None:
        settle(cfg, "mup_base_d_model", MUP_BASE_D_MODEL)
    positive("mup_base_d_model", cfg.mup_base_d_model)
    if cfg.mup_base_head_dim is not None:
        positive("mup_base_head_dim", cfg.mup_base_head_dim)
