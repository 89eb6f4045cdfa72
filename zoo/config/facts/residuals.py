"""Facts about what the residual path carries besides the hidden state, in torch-free rows: the
value residual (`model.value_residual`: every layer's values mixed with the first layer's),
value embeddings (`model.value_embeds`: tables of the input tokens added to chosen layers'
values) and hyper-connections (`model.hyper_connections`, `model.residual_streams`: n residual
streams with learned width- and depth-connections). Each row says what it computes, where it
comes from, the parameters and FLOPs it adds and what it refuses; `ModelConfig` runs
`check_residuals` before any weight exists, `zoo.config.schema.params` and
`zoo.config.schema.flops` count from these rows, `zoo.nn.values` and `zoo.nn.hyper` build them.

Shape names: D = d_model, Hkv = n_kv_heads, Dh = head_dim, V = vocab_size, L = a stack's layers,
n = model.residual_streams. A "site" is one residual connection: a sequential block has one per
sub-layer (2, or 3 with cross-attention), a parallel block one for all its branches.
Neither option changes the KV cache: the mixed values are what a layer caches, and the first
layer's values or a table's lookup are needed for the new tokens only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from zoo.config.choice import Choice, listed
from zoo.config.errors import ConfigError
from zoo.config.facts.blocks import BLOCK_FACTS
from zoo.config.facts.kv import KVKind
from zoo.config.facts.layers import stack_depths
from zoo.config.facts.norms import NORM_FACTS
from zoo.config.facts.placements import PLACEMENT_FACTS
from zoo.config.facts.starts import ONES, ZEROS, Starts, constant

if TYPE_CHECKING:
    from zoo.config.schema.model import ModelConfig


class ValueResidual(Choice):
    none = "none"  # each layer attends over its own values
    fixed = "fixed"  # v_l <- 0.5·v_l + 0.5·v_1 (ResFormer)
    learned = "learned"  # v_l <- (1 - λ_l)·v_l + λ_l·v_1, λ_l learned (modded-nanogpt)


class HyperConnections(Choice):
    none = "none"  # one residual stream: x + f(x)
    static = "static"  # n streams, learned connection weights (SHC)
    dynamic = "dynamic"  # n streams, connection weights that also depend on the streams (DHC)


DEFAULT_STREAMS = 4  # n when model.residual_streams is left out under hyper-connections (Zhu et al.: n = 4)


def _no_refusal(cfg: ModelConfig) -> str | None:
    return None


@dataclass(frozen=True, kw_only=True)
class ValueResidualFacts:
    """One value-residual kind's row.

    - `what`: what the values of layer l (B, Hkv, T, Dh) become before attention reads them
      (and before the KV cache keeps them), v_1 being the stack's first layer's values.
    - `paper`: where it comes from.
    - `parameters(L)`: the parameters it adds to a stack of L layers.
    - `starts`: how they start, by name (`zoo.config.facts.starts`).
    - `refuses`: the one-line refusal of a config it cannot serve, None where it serves it.
    """

    what: str
    paper: str
    parameters: Callable[[int], int]
    starts: Starts = field(default_factory=dict, compare=False)
    refuses: Callable[[ModelConfig], str | None] = _no_refusal


def _needs_two_layers(cfg: ModelConfig) -> str | None:
    for key, depth in stack_depths(cfg):
        if depth < 2:
            return (
                f"model.value_residual={cfg.value_residual.value} mixes each layer's values with the first "
                f"layer's, but model.{key}={depth}: a stack needs 2 layers or more"
            )
    return None


VALUE_RESIDUAL_FACTS: dict[ValueResidual, ValueResidualFacts] = {
    ValueResidual.none: ValueResidualFacts(
        what="v_l as projected",
        paper="Vaswani et al. 2017",
        parameters=lambda L: 0,
    ),
    ValueResidual.fixed: ValueResidualFacts(
        what="v_l <- 0.5·v_l + 0.5·v_1 in every layer after the first (self-attention of each stack; "
        "an encoder-decoder's encoder and decoder each mix with their own first layer)",
        paper="Zhou et al. 2024 (ResFormer, 'Value Residual Learning'); modded-nanogpt record of "
        "2024-11-06, 'v = 0.5 * v + 0.5 * v1.view_as(v)'",
        parameters=lambda L: 0,
        refuses=_needs_two_layers,
    ),
    ValueResidual.learned: ValueResidualFacts(
        what="v_l <- (1 - λ_l)·v_l + λ_l·v_1 in every layer after the first, one learned λ_l per "
        "layer starting at 0.5 (the fixed kind at the start)",
        paper="modded-nanogpt record of 2024-11-06 (@Grad62304977), 'v = (1 - self.lamb) * v + "
        "self.lamb * v1.view_as(v)', lamb = nn.Parameter(torch.tensor(0.5))",
        parameters=lambda L: L - 1,
        starts={"residual_lambdas": constant(0.5)},
        refuses=_needs_two_layers,
    ),
}


@dataclass(frozen=True, kw_only=True)
class ValueEmbedFacts:
    """The value embeddings' row (`model.value_embeds` = k tables; 0 = none).

    - `what`, `paper`: as the other rows.
    - `embedding(cfg)`: the table parameters of one stack (embeddings: lookups, no FLOPs).
    - `parameters(cfg)`: the mixing weights of one stack (non-embedding).
    - `starts`: how the mixing weights start (the tables: as every embedding, Normal(0, init_std)).
    """

    what: str
    paper: str
    embedding: Callable[[ModelConfig], int]
    parameters: Callable[[ModelConfig], int]
    starts: Starts = field(default_factory=dict, compare=False)


VALUE_EMBED_FACTS = ValueEmbedFacts(
    what="k tables of V × Hkv·Dh; table i's lookup of the input tokens ve_i is added to the values "
    "of layers i and L - k + i (the first k and the last k layers): v <- λ_0·v + λ_1·ve_i, λ_0 and "
    "λ_1 learned per layer, starting at 0.5; each stack of an encoder-decoder has its own tables",
    paper="modded-nanogpt records of 2024-12-04 (@KoszarskyB, 'token value embeddings') and "
    "2025-01-16 (the '012 ... 012' layout of three tables: 've = [ve[0], ve[1], ve[2], None, ..., "
    "ve[0], ve[1], ve[2]]'; 'v = self.lambdas[0] * v + self.lambdas[1] * ve.view_as(v)', lambdas "
    "starting at [0.5, 0.5]); the record leaves the values of the other layers as projected "
    "here too, but scales them by a learned λ_0 there",
    embedding=lambda cfg: cfg.value_embeds * cfg.vocab_size * cfg.n_kv_heads * cfg.head_dim,
    parameters=lambda cfg: 2 * 2 * cfg.value_embeds,
    starts={"embed_lambdas": constant(0.5)},
)


def value_embed_layers(n_layers: int, k: int) -> list[int | None]:
    """The table each of a stack's `n_layers` layers adds to its values (None: none): table i at
    layers i and n_layers - k + i."""
    out: list[int | None] = [None] * n_layers
    for i in range(k):
        out[i] = out[n_layers - k + i] = i
    return out


@dataclass(frozen=True, kw_only=True)
class HyperFacts:
    """One hyper-connection kind's row.

    - `what`: what one residual site computes from the n streams H (B, T, n, D) and its branch f.
    - `paper`: where it comes from.
    - `parameters(cfg)`: the parameters of one site.
    - `flops(cfg)`: the matrix-multiply FLOPs of one site per token.
    - `starts`: how its parameters start, by name.
    - `refuses`: the one-line refusal of a config it cannot serve.
    """

    what: str
    paper: str
    parameters: Callable[[ModelConfig], int]
    flops: Callable[[ModelConfig], int]
    starts: Starts = field(default_factory=dict, compare=False)
    refuses: Callable[[ModelConfig], str | None] = _no_refusal


def _static_parameters(cfg: ModelConfig) -> int:
    n = cfg.residual_streams
    return n * (n + 1) + n  # α (n × (n + 1)): the branch input's weights and A_r; β (n)


def _width_flops(cfg: ModelConfig) -> int:
    """Mixing the n streams into n + 1 (the branch input and the n carried on)."""
    n = cfg.residual_streams
    return 2 * n * (n + 1) * cfg.d_model


def _dynamic_parameters(cfg: ModelConfig) -> int:
    n, D = cfg.residual_streams, cfg.d_model
    norm = NORM_FACTS[cfg.norm_type].parameters(D, cfg.bias)
    return _static_parameters(cfg) + D * (n + 1) + D + 2 + norm  # W_α, W_β, s_α, s_β and the norm


def _dynamic_flops(cfg: ModelConfig) -> int:
    n, D = cfg.residual_streams, cfg.d_model
    return _width_flops(cfg) + 2 * n * D * (n + 1) + 2 * n * D  # norm(H)·W_α and norm(H)·W_β per stream


def _hyper_refuses(cfg: ModelConfig) -> str | None:
    if PLACEMENT_FACTS[cfg.norm].normalizes_stream:
        return (
            f"model.hyper_connections={cfg.hyper_connections.value} replaces the residual sum that model.norm="
            f"{cfg.norm.value} normalizes; use model.norm="
            f"{listed(k.value for k, row in PLACEMENT_FACTS.items() if not row.normalizes_stream)}"
        )
    return None


HYPER_FACTS: dict[HyperConnections, HyperFacts] = {
    HyperConnections.none: HyperFacts(
        what="one stream: x + f(x) (model.residual_streams=1)",
        paper="He et al. 2016",
        parameters=lambda cfg: 0,
        flops=lambda cfg: 0,
    ),
    HyperConnections.static: HyperFacts(
        what="n streams H, copies of the embeddings at the start and summed at the end; each site "
        "mixes them, [h, H'] = αᵀ·H (h the branch input, H' the n carried on), and adds the branch "
        "to each: H <- H' + β ⊗ f(h); α starts as [e_(j mod n) | I] (site j of the stack), β as ones, "
        "so one stream's start is the plain residual",
        paper="Zhu et al. 2024 ('Hyper-Connections', ICLR 2025: static hyper-connections, SHC); "
        "x-transformers num_residual_streams",
        parameters=_static_parameters,
        flops=_width_flops,
        starts={"alpha": ZEROS, "beta": ONES},  # α is held as its offset from [e_(j mod n) | I]
        refuses=_hyper_refuses,
    ),
    HyperConnections.dynamic: HyperFacts(
        what="as static, with α and β also read from the streams: α + s_α·tanh(norm(H)·W_α), "
        "β + s_β·tanh(norm(H)·W_β), per token and stream; W_α, W_β start at zero, s_α, s_β at 0.01 "
        "(the static start)",
        paper="Zhu et al. 2024 ('Hyper-Connections', dynamic hyper-connections, DHC, their Algorithm 2; "
        "the norm is model.norm_type's)",
        parameters=_dynamic_parameters,
        flops=_dynamic_flops,
        starts={
            "alpha": ZEROS,
            "beta": ONES,
            "alpha_fn": ZEROS,
            "beta_fn": ZEROS,
            "alpha_scale": constant(0.01),
            "beta_scale": constant(0.01),
        },
        refuses=_hyper_refuses,
    ),
}


def residual_sites(cfg: ModelConfig, *, cross: bool) -> int:
    """The residual connections of one block: one per sub-layer, one in all for a parallel block."""
    return 1 if BLOCK_FACTS[cfg.block].parallel else (3 if cross else 2)


def residual_parameters(cfg: ModelConfig, n_layers: int, *, cross: bool) -> int:
    """The non-embedding parameters the three options add to one stack of `n_layers` blocks."""
    hyper = HYPER_FACTS[cfg.hyper_connections].parameters(cfg) * residual_sites(cfg, cross=cross) * n_layers
    embeds = VALUE_EMBED_FACTS.parameters(cfg)
    return VALUE_RESIDUAL_FACTS[cfg.value_residual].parameters(n_layers) + embeds + hyper


def residual_flops(cfg: ModelConfig, *, cross: bool) -> int:
    """The matrix-multiply FLOPs per token they add to one block (the value options: none, their
    mixing is elementwise and a table is a lookup)."""
    return HYPER_FACTS[cfg.hyper_connections].flops(cfg) * residual_sites(cfg, cross=cross)


def _integer(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"model.{name} must be an integer >= {low}, got {value!r}")
    return value


def check_residuals(cfg: ModelConfig, settle: Callable[[object, str, object], None]) -> None:
    """Parse and refuse, on one line and before any weight exists, what the three options cannot
    serve; fill in model.residual_streams where it was left out. `settle`: the schema's writer
    of its frozen fields (`zoo.config.schema.frozen.settle`)."""
    settle(cfg, "value_residual", ValueResidual.parse(cfg.value_residual, "model.value_residual"))
    settle(cfg, "hyper_connections", HyperConnections.parse(cfg.hyper_connections, "model.hyper_connections"))
    refusal = VALUE_RESIDUAL_FACTS[cfg.value_residual].refuses(cfg) or HYPER_FACTS[cfg.hyper_connections].refuses(cfg)
    if refusal is not None:
        raise ConfigError(refusal)
    k = _integer("value_embeds", cfg.value_embeds, 0)
    if cfg.kv == KVKind.latent:  # zoo.nn.latent_attention caches a latent, not per-head values to mix
        for name, value, off in (("value_residual", cfg.value_residual, ValueResidual.none), ("value_embeds", k, 0)):
            if value != off:
                shown = value.value if isinstance(value, ValueResidual) else value
                raise ConfigError(
                    f"model.{name}={shown} mixes per-head values, which model.kv={KVKind.latent.value} does "
                    f"not project; use model.kv={KVKind.heads.value}"
                )
    for key, depth in stack_depths(cfg):
        if 2 * k > depth:
            raise ConfigError(
                f"model.value_embeds={k} adds table i to layers i and L - k + i, but model.{key}={depth} "
                f"has fewer than 2·k layers: lower model.value_embeds to at most {depth // 2}"
            )
    hyper = cfg.hyper_connections != HyperConnections.none
    if cfg.residual_streams is None:
        settle(cfg, "residual_streams", DEFAULT_STREAMS if hyper else 1)
    n = _integer("residual_streams", cfg.residual_streams, 1)
    if not hyper and n != 1:
        raise ConfigError(
            f"model.residual_streams={n} needs hyper-connections to join the streams: set model.hyper_connections="
            f"{listed(k.value for k in HyperConnections if k != HyperConnections.none)}"
        )
    if hyper and n < 2:
        raise ConfigError(
            f"model.hyper_connections={cfg.hyper_connections.value} with model.residual_streams={n}: one stream is "
            "the plain residual (model.hyper_connections=none); hyper-connections need 2 streams or more"
        )


def non_default_residual_options(cfg: ModelConfig) -> list[str]:
    """These options of `cfg` away from the plain residual, as `key=value`: what a peer or an
    export that maps the plain block only must refuse (never drop)."""
    out = []
    if cfg.value_residual != ValueResidual.none:
        out.append(f"model.value_residual={cfg.value_residual.value}")
    if cfg.value_embeds:
        out.append(f"model.value_embeds={cfg.value_embeds}")
    if cfg.hyper_connections != HyperConnections.none:
        out.append(f"model.hyper_connections={cfg.hyper_connections.value}")
        out.append(f"model.residual_streams={cfg.residual_streams}")
    return out
