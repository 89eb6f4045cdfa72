"""The one mechanism that reads a family's converter table: export, import and the refusal.

A family (`Family`) is data: which zoo compositions it reproduces (`Composition`: what
`matches` tests, and the keys the import starts from), how the two configs map (`configs`, the
two directions, most of it a table of `Fields` read one way and written the other) and how the
weights map (`table`: rows of zoo name <-> transformers names with a named `Transform`).
`Converter` reads it both ways; nothing here knows a family.

A `Row`'s zoo tensor is its transformers tensors concatenated along dim 0 (zoo fuses q, k, v
into `qkv_proj` and gate, up into `ff.w_in`), then turned by `transform.to_zoo`; export turns it
back (`transform.to_hf`) and splits it by the rows of each transformers tensor. A row whose
`joins` names further zoo tensors goes the other way too: zoo's tensors concatenated along dim 0
(its own first) are what the transform turns, and its result is split by their rows (Qwen3-Next's
`q_proj` holds each head's query and gate rows, zoo's `qkv_proj` and `gate.proj`). A `Stack`
repeats its rows once per layer, `{i}` in the names standing for the layer's index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import UnsupportedConfig, composed_as, load_exact, tied, untie
from zoo.models import build_model

TensorMap = Callable[[torch.Tensor, ModelConfig], torch.Tensor]
WB = (".weight", ".bias")  # the suffixes of a row whose layer has a bias


def _keep(t: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    return t


@dataclass(frozen=True)
class Transform:
    """A named change of one tensor: `to_zoo` on the way in, `to_hf` (its inverse) on the way out."""

    name: str
    to_zoo: TensorMap = _keep
    to_hf: TensorMap = _keep

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a Transform needs a name")


IDENTITY = Transform("identity")
# Gemma's RMSNorm computes x·(1 + w) where zoo's computes x·w: zoo's weight is w + 1
PLUS_ONE = Transform("plus_one", lambda t, cfg: t + 1.0, lambda t, cfg: t - 1.0)
# a (1, V) row of transformers' (BART's final_logits_bias) is zoo's (V,)
ROW = Transform("row", lambda t, cfg: t[0], lambda t, cfg: t[None])


@dataclass(frozen=True)
class Row:
    """zoo name <-> transformers names (concatenated in this order), each with every suffix."""

    zoo: str
    hf: tuple[str, ...]
    transform: Transform = IDENTITY
    suffixes: tuple[str, ...] = ("",)
    # in a Stack: does layer i of cfg hold this weight (a mixture's router, a gated unit's gate)?
    when: Callable[[ModelConfig, int], bool] | None = None
    # a weight transformers always has and zoo only with an option: zeros on export where zoo has none
    optional: bool = False
    # further zoo names (under the same prefix and suffix) whose tensors follow `zoo`'s in the one
    # tensor the transform turns
    joins: tuple[str, ...] = ()

    def zoo_names(self, name: str) -> list[str]:
        """The zoo names of this row's tensor `name` (the row's `zoo` under a prefix and a
        suffix): `name`, then each of `joins` under the same prefix and suffix."""
        at = name.rindex(self.zoo)
        prefix, suffix = name[:at], name[at + len(self.zoo) :]
        return [name, *(prefix + other + suffix for other in self.joins)]

    def __post_init__(self) -> None:
        if not self.zoo or not self.hf or not self.suffixes:
            raise ValueError(f"a Row needs a zoo name, transformers names and suffixes: {self}")


def row(zoo: str, *hf: str, **options: Any) -> Row:
    """`Row(zoo, hf, ...)` with the transformers names as arguments."""
    return Row(zoo, hf, **options)


@dataclass(frozen=True)
class Stack:
    """Rows repeated for each of `count(cfg)` layers, under the prefixes `zoo` and `hf` ({i})."""

    zoo: str
    hf: str
    rows: tuple[Row, ...]
    count: Callable[[ModelConfig], int] = lambda cfg: cfg.n_layers

    def __post_init__(self) -> None:
        if "{i}" not in self.zoo or "{i}" not in self.hf:
            raise ValueError(f"a Stack's prefixes name the layer as {{i}}: {self.zoo!r}, {self.hf!r}")


@dataclass(frozen=True)
class Table:
    """Every weight of a family: the token table (`embed`) and the output projection
    (`lm_head`, the same tensor where tied), rows once (`top`), rows per layer (`stacks`), and
    the transformers names that share another's tensor (`aliases`)."""

    embed: str
    top: tuple[Row, ...] = ()
    stacks: tuple[Stack, ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)
    lm_head: str = "lm_head.weight"

    def __post_init__(self) -> None:
        if not self.embed or not self.lm_head:
            raise ValueError("a Table names the token table and the output projection")

    def shared(self) -> dict[str, str]:
        """transformers name -> the name whose tensor it shares (the head a tied model saves once)."""
        return {self.lm_head: self.embed, **self.aliases}

    def pairs(self, cfg: ModelConfig) -> Iterator[tuple[str, list[str], Row]]:
        """(zoo name, [transformers names], row) of every weight of a model of `cfg`."""
        for r in (Row("embed.weight", (self.embed,)), Row("lm_head.weight", (self.lm_head,)), *self.top):
            for s in r.suffixes:
                yield r.zoo + s, [name + s for name in r.hf], r
        for stack in self.stacks:
            for i in range(stack.count(cfg)):
                z, h = stack.zoo.format(i=i), stack.hf.format(i=i)
                for r in stack.rows:
                    if r.when is None or r.when(cfg, i):
                        for s in r.suffixes:
                            yield z + r.zoo + s, [h + name + s for name in r.hf], r


@dataclass(frozen=True)
class Field:
    """A config field that maps as it is: zoo's `ModelConfig.zoo` <-> transformers' `hf`."""

    zoo: str
    hf: str


@dataclass(frozen=True)
class Fields:
    """A table of `Field`s, read from a transformers config and written to its arguments."""

    rows: tuple[Field, ...]

    def read(self, config: Any) -> dict[str, Any]:
        """zoo keys of a transformers config."""
        return {f.zoo: getattr(config, f.hf) for f in self.rows}

    def write(self, cfg: ModelConfig) -> dict[str, Any]:
        """transformers config arguments of a zoo config."""
        return {f.hf: getattr(cfg, f.zoo) for f in self.rows}

    def extended(self, *pairs: str) -> Fields:
        """These fields and those of "zoo_name hf_name" strings."""
        return Fields(self.rows + fields(*pairs).rows)


def fields(*pairs: str) -> Fields:
    """The `Fields` of "zoo_name hf_name" strings."""
    return Fields(tuple(Field(*pair.split()) for pair in pairs))


# the config fields most transformers configs name alike (the norm's epsilon is each family's)
HIDDEN_FIELDS = fields(
    "d_model hidden_size",
    "n_heads num_attention_heads",
    "n_layers num_hidden_layers",
    "d_ff intermediate_size",
    "vocab_size vocab_size",
    "max_seq_len max_position_embeddings",
    "tie_embeddings tie_word_embeddings",
)


def tied_embeddings(cfg: ModelConfig) -> bool:
    return cfg.tie_embeddings


def one_kv_per_head(cfg: ModelConfig) -> bool:
    return cfg.n_kv_heads == cfg.n_heads


def heads_span_model(cfg: ModelConfig) -> bool:
    return cfg.head_dim * cfg.n_heads == cfg.d_model


# multi-head attention whose heads span d_model (the families with one q, k, v per head)
FULL_HEADS = (one_kv_per_head, heads_span_model)


@dataclass(frozen=True)
class Composition:
    """The zoo compositions a family reproduces, all that `matches` reads: `composed_as`'s
    choices (a tuple allows several values) and options, model.bias, and further `checks`."""

    family: str
    position: str
    norm: str
    norm_type: str
    activation: str | tuple[str, ...]
    bias: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    checks: tuple[Callable[[ModelConfig], bool], ...] = ()

    def __post_init__(self) -> None:
        if not all((self.family, self.position, self.norm, self.norm_type, self.activation)):
            raise ValueError(f"a Composition names every choice: {self}")

    def matches(self, cfg: ModelConfig) -> bool:
        choices = {"family": self.family, "position": self.position, "norm": self.norm}
        return (
            composed_as(cfg, self.options, **choices, norm_type=self.norm_type, activation=self.activation)
            and cfg.bias == self.bias
            and all(check(cfg) for check in self.checks)
        )

    def keys(self, *read: dict[str, Any], **more: Any) -> dict[str, Any]:
        """ModelConfig keys of the composition (the position's kind; the activation where it
        names one; dropout 0), then those `read` from a config's fields, then `more` (the
        activation, the position's parameters, ...)."""
        keys: dict[str, Any] = {"family": self.family, "position": {"kind": self.position}, "norm": self.norm}
        keys.update(norm_type=self.norm_type, bias=self.bias, dropout=0.0)
        if isinstance(self.activation, str):
            keys["activation"] = self.activation
        for fields_read in read:
            keys.update(fields_read)
        return {**keys, **more}


@dataclass(frozen=True)
class Family:
    """One Hugging Face architecture as data (see the module's docstring)."""

    # model_type, the transformers model class with the language-model head, its config class
    names: tuple[str, str, str]
    description: str
    composition: Composition
    # transformers config -> ModelConfig keys (refusing what zoo cannot reproduce), and
    # zoo config -> transformers config arguments
    configs: tuple[Callable[[Any], dict[str, Any]], Callable[[ModelConfig], dict[str, Any]]]
    table: Table
    # tie_embeddings read from the weights (the class ties or not whatever its config says)
    tie_from_weights: bool = False

    def __post_init__(self) -> None:
        if not all(self.names) or not self.description:
            raise ValueError(f"a Family names its model_type and classes and describes itself: {self.names}")

    @property
    def model_type(self) -> str:
        return self.names[0]


class Converter:
    """zoo <-> transformers for one `Family`, read from its tables."""

    def __init__(self, family: Family) -> None:
        self.family = family
        self.description = family.description

    def matches(self, cfg: ModelConfig) -> bool:
        """Does the zoo config `cfg` export as this family, computing the same function?"""
        return self.family.composition.matches(cfg)

    def zoo_config(self, config: Any, tie: bool | None = None) -> ModelConfig:
        """The zoo config of a transformers config; UnsupportedConfig for a field zoo cannot
        reproduce. `tie`: whether the weights are tied, for a family that reads it from them."""
        keys = self.family.configs[0](config)
        if tie is not None and self.family.tie_from_weights:
            keys["tie_embeddings"] = tie
        return ModelConfig(**keys)

    def from_hf(self, hf_model: Any) -> torch.nn.Module:
        """A zoo model (eval mode) with `hf_model`'s weights."""
        model = build_model(self.zoo_config(hf_model.config, tie=tied(hf_model)))
        cfg, own = model.config, model.state_dict()
        table = self.family.table
        sd = dict(hf_model.state_dict())
        for alias, source in table.shared().items():
            sd.setdefault(alias, sd[source])
        out: dict[str, torch.Tensor] = {}
        for ours, theirs, r in table.pairs(cfg):
            if ours not in own and r.optional:
                continue
            tensor = r.transform.to_zoo(torch.cat([sd[t] for t in theirs]), cfg)  # fused: rows in order
            if r.joins:  # split among zoo's tensors by their rows
                names = r.zoo_names(ours)
                out.update(zip(names, tensor.split([own[n].shape[0] for n in names])))
            else:
                out[ours] = tensor
        load_exact(model, out)
        return model.eval()

    def to_hf(self, model: Any) -> Any:
        """The transformers model (eval mode) of the zoo `model`; UnsupportedConfig where its
        composition is not this family's."""
        import transformers

        cfg = model.config
        if not self.matches(cfg):
            raise UnsupportedConfig(f"this composition is not {self.description}")
        _, model_class, config_class = self.family.names
        hf_config = getattr(transformers, config_class)(**self.family.configs[1](cfg))
        hf = getattr(transformers, model_class)(hf_config)
        if self.family.tie_from_weights and not cfg.tie_embeddings:
            untie(hf)
        own = hf.state_dict()
        table = self.family.table
        sd = model.state_dict()
        out: dict[str, torch.Tensor] = {}
        for ours, theirs, r in table.pairs(cfg):
            if ours not in sd and r.optional:
                out.update({t: torch.zeros(own[t].shape) for t in theirs})
                continue
            tensor = r.transform.to_hf(torch.cat([sd[n] for n in r.zoo_names(ours)]), cfg)
            out.update(zip(theirs, tensor.split([own[t].shape[0] for t in theirs])))
        for alias, source in table.shared().items():
            if alias in own:
                out.setdefault(alias, out[source])
        load_exact(hf, out)
        return hf.eval()
