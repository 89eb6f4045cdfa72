"""What every model family shares: token (and token-type) embedding, the output head
(optional transform, output projection, optionally tied, optional bias), weight
initialisation, and the output object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from zoo.config.schema.model import ModelConfig
from zoo.config.schema.task import OutputLoss
from zoo.models.init import ZEROS, Init, draw_seed, initialise, missing_rules, normal
from zoo.models.parametrization import hidden_init_std, is_hidden
from zoo.nn.cache import Cache
from zoo.nn.chunked_loss import IGNORE, chunked_linear_cross_entropy, liger_linear_cross_entropy
from zoo.nn.embedding import TokenEmbedding
from zoo.nn.feedforward import ACTIVATIONS
from zoo.nn.host import host_reads_are_free
from zoo.nn.norm import build_norm


@dataclass
class ModelOutput:
    """logits (B, T, V) (None when a caller asked for hidden states only); hidden_states
    (B, T, D) after the final norm; cache for incremental decoding when asked for;
    encoder_hidden_states (B, S, D) for encoder-decoder models."""

    logits: torch.Tensor | None
    hidden_states: torch.Tensor
    cache: Cache | None = None
    encoder_hidden_states: torch.Tensor | None = None


class TokenLoss(NamedTuple):
    """The training loss of a token task and its parts: `loss` = `cross_entropy` + task.z_loss ×
    `z` (what backward runs), `cross_entropy` the mean cross-entropy, `z` the mean over target
    tokens of log(Z)², Z the softmax normaliser of the output logits (PaLM's z-loss, Chowdhery
    et al. 2022), None without a z-loss. The parts are detached (for logging)."""

    loss: torch.Tensor
    cross_entropy: torch.Tensor
    z: torch.Tensor | None = None


def softcap(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    """cap·tanh(logits / cap) (Gemma 2's final logit soft-cap); the logits as they are for None."""
    return logits if cap is None else cap * torch.tanh(logits / cap)


def make_position_ids(
    attention_mask: torch.Tensor | None, length: int, cache: Cache | None, device: torch.device
) -> torch.Tensor:
    """Positions of the `length` newest tokens: (1, T) counting on from what `cache` holds, or,
    given a (B, past + T) mask, (B, T) counting only real tokens, so left-padded rows start at 0."""
    if attention_mask is None:
        if cache is None:
            return torch.arange(length, device=device)[None]  # (1, T)
        return cache.next_positions(length, device)  # (1, T)
    counted = attention_mask.long().cumsum(-1) - 1  # (B, S)
    return counted.clamp(min=0)[:, -length:]  # (B, T)


class HeadTransform(nn.Module):
    """Dense D -> D, activation, norm: BERT's masked-LM transform (Devlin et al. 2019), applied
    before the output projection. (B, T, D) -> (B, T, D)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.act = ACTIVATIONS[cfg.activation]  # gated kinds: their gate's nonlinearity
        self.norm = build_norm(cfg.norm_type, cfg.d_model, cfg.norm_eps, cfg.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.act(self.dense(x)))


class ZooModel(nn.Module):
    """Base of the three families. Subclasses build their stacks, then call `_init_weights`.

    Output head: hidden (B, T, D) -> [head_transform] -> [· D^-0.5] [· 1/m] -> lm_head ->
    [+ output_bias] -> logits (B, T, V); each bracket is a config option (1/m: μP's output
    multiplier, model.parametrization=mup). A classifier removes the head
    (`drop_output_head`)."""

    sharded: bool = False  # set by zoo.models.sharding.shard

    def __init__(self, cfg: ModelConfig, init_seed: int | None = None) -> None:
        super().__init__()
        self.config = cfg
        # every parameter starts from a generator of its own, seeded by this and its name
        # (`zoo.models.init`): build_model draws it from torch's global generator
        self.init_seed = draw_seed() if init_seed is None else int(init_seed)
        self.embed = TokenEmbedding(cfg.vocab_size, cfg.d_model, multiplier=cfg.embedding_multiplier)
        self.token_type_embed = nn.Embedding(cfg.token_types, cfg.d_model) if cfg.token_types else None
        self.head_transform = HeadTransform(cfg) if cfg.head_transform else None
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.output_bias = nn.Parameter(torch.zeros(cfg.vocab_size)) if cfg.output_bias else None  # (V,)

    def init_rules(self) -> dict[str, Init]:
        """{parameter name: how it starts}: Normal(0, init_std) for every `nn.Linear` and
        `nn.Embedding` (the token embedding: Normal(0, `ModelConfig.embedding_std`); under mup
        the hidden matrices Normal(0, init_std / sqrt(m)): `zoo.models.parametrization`), zero
        biases; a module of zoo's own starts its own parameters as its row declares (its
        `starts`, `zoo.config.facts.starts`: norm gains at one, a mixture's expert matrices at
        init_std). Names as `named_parameters()` gives them (a tied output projection is the
        token embedding)."""
        rules: dict[str, Init] = {}
        for prefix, module in self.named_modules():
            dot = f"{prefix}." if prefix else ""
            if isinstance(module, (nn.Linear, nn.Embedding)):
                if module is self.embed:
                    std = self.config.embedding_std
                elif is_hidden(module, self.lm_head):
                    std = hidden_init_std(self.config)
                else:
                    std = self.config.init_std
                rules[f"{dot}weight"] = normal(std)
                if getattr(module, "bias", None) is not None:
                    rules[f"{dot}bias"] = ZEROS
            own = dict(module.named_parameters(recurse=False))
            for name, start in getattr(module, "starts", {}).items():
                if name in own:
                    rules[f"{dot}{name}"] = start.resolved(self.config.init_std)
        if self.output_bias is not None:
            rules["output_bias"] = ZEROS
        missing = missing_rules(self, rules)
        if missing:  # a new kind's module holds a parameter its row's `starts` does not declare
            raise KeyError(f"no initialisation rule for {', '.join(missing)} (declare it in its row's starts)")
        names = {name for name, _ in self.named_parameters()}
        return {name: rule for name, rule in rules.items() if name in names}  # tied: one name

    def _init_weights(self) -> None:
        """Tie the output projection to the token embedding if asked, then give every
        parameter its first value by `init_rules` (parameters on the meta device wait for
        `zoo.models.init.materialize`)."""
        if self.config.tie_embeddings:
            self.lm_head.weight = self.embed.weight
        initialise(self.named_parameters(), self.init_rules(), self.init_seed)

    def embed_tokens(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids (B, T), token_type_ids (B, T) or None (= type 0) -> (B, T, D)."""
        x = self.embed(input_ids)  # (B, T, D)
        if self.token_type_embed is None:
            if token_type_ids is not None:
                raise ValueError("token_type_ids given, but this model has none (model.token_types=0)")
            return x
        if token_type_ids is None:
            return x + self.token_type_embed.weight[0]
        if (
            token_type_ids.numel()
            and host_reads_are_free(token_type_ids)
            and not 0 <= int(token_type_ids.min()) <= int(token_type_ids.max()) < self.config.token_types
        ):
            raise ValueError(
                f"token_type_ids must be in [0, {self.config.token_types}) "
                f"(model.token_types={self.config.token_types})"
            )
        return x + self.token_type_embed(token_type_ids)  # (B, T, D)

    def _head_input(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., D) -> (..., D): what the output projection reads."""
        if self.lm_head is None:
            raise ValueError("this model's output projection was removed (a classifier replaced it)")
        if self.head_transform is not None:
            hidden = self.head_transform(hidden)
        multiplier = self.config.output_multiplier  # scale_output's D^-0.5, mup's 1/m
        if multiplier != 1.0:
            hidden = hidden * multiplier
        return hidden

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, V), soft-capped with model.final_softcap."""
        logits = F.linear(self._head_input(hidden), self.lm_head.weight, self.output_bias)  # (B, T, V)
        return softcap(logits, self.config.final_softcap)

    def token_loss(
        self,
        hidden: torch.Tensor,
        targets: torch.Tensor,
        *,
        chunk: int = 1024,
        label_smoothing: float = 0.0,
        output_loss: OutputLoss = OutputLoss.chunked,
        sparse_targets: bool = False,
    ) -> torch.Tensor:
        """Mean cross-entropy of the output head on hidden (N, D) against targets (N,) (-100 =
        no target), equal to cross_entropy(logits(hidden), targets): `token_losses(...).loss`
        without a z-loss."""
        return self.token_losses(
            hidden,
            targets,
            chunk=chunk,
            label_smoothing=label_smoothing,
            output_loss=output_loss,
            sparse_targets=sparse_targets,
        ).loss

    def token_losses(
        self,
        hidden: torch.Tensor,
        targets: torch.Tensor,
        *,
        chunk: int = 1024,
        label_smoothing: float = 0.0,
        output_loss: OutputLoss = OutputLoss.chunked,
        sparse_targets: bool = False,
        z_loss: float = 0.0,
    ) -> TokenLoss:
        """The loss of the output head on hidden (N, D) against targets (N,) (-100 = no target):
        mean cross-entropy of logits(hidden) (soft-capped with model.final_softcap) plus, with
        `z_loss` > 0, z_loss × mean log(Z)² over the target rows. `output_loss`: chunked
        (`chunked_linear_cross_entropy`, the (N, V) logits never whole), logits (built whole,
        then F.cross_entropy: fewer kernel launches) or liger (Liger-Kernel's fused Triton
        kernel, CUDA only; neither soft-cap nor z-loss).

        Rows without a target are dropped before the head where that is free (eager on the
        CPU) or pays for its host sync (sparse_targets: a masked-LM batch has targets on ~15%
        of its rows). On an accelerator otherwise, and always under torch.compile, every row
        goes through the head (ignored rows weigh 0): no host sync, no data-dependent shape."""
        if host_reads_are_free(targets) or (sparse_targets and not torch.compiler.is_compiling()):
            keep = targets != IGNORE  # (N,)
            if not bool(keep.all()):
                rows = keep.nonzero().squeeze(1)  # (n,)
                hidden, targets = hidden.index_select(0, rows), targets.index_select(0, rows)  # (n, D), (n,)
        cap = self.config.final_softcap
        if output_loss == OutputLoss.logits:
            logits = softcap(F.linear(self._head_input(hidden), self.lm_head.weight, self.output_bias).float(), cap)
            ce = F.cross_entropy(logits, targets, ignore_index=IGNORE, label_smoothing=label_smoothing)  # (N, V) -> ()
            if not z_loss:
                return TokenLoss(ce, ce.detach())
            valid = targets != IGNORE  # (N,)
            log_z = torch.logsumexp(logits, dim=-1)  # (N,)
            z = torch.where(valid, log_z.square(), 0.0).sum() / valid.sum().clamp(min=1)
            return TokenLoss(ce + z_loss * z, ce.detach(), z.detach())
        if output_loss == OutputLoss.liger:
            if cap is not None or z_loss:
                raise ValueError(
                    "task.output_loss=liger takes neither model.final_softcap nor task.z_loss; "
                    "use task.output_loss=logits or chunked"
                )
            loss = liger_linear_cross_entropy(
                self._head_input(hidden),
                self.lm_head.weight,
                targets,
                bias=self.output_bias,
                label_smoothing=label_smoothing,
            )
            return TokenLoss(loss, loss.detach())
        loss, ce, z = chunked_linear_cross_entropy(
            self._head_input(hidden),
            self.lm_head.weight,
            targets,
            bias=self.output_bias,
            chunk=chunk,
            label_smoothing=label_smoothing,
            softcap=cap,
            z_loss=z_loss,
            parts=True,
        )
        return TokenLoss(loss, ce, z if z_loss else None)

    def forward_loss(
        self,
        inputs: dict,
        targets: torch.Tensor,
        *,
        chunk: int = 1024,
        label_smoothing: float = 0.0,
        output_loss: OutputLoss = OutputLoss.chunked,
        sparse_targets: bool = False,
    ) -> torch.Tensor:
        """The mean token loss of one forward: `forward_losses(...).loss` without a z-loss."""
        return self.forward_losses(
            inputs,
            targets,
            chunk=chunk,
            label_smoothing=label_smoothing,
            output_loss=output_loss,
            sparse_targets=sparse_targets,
        ).loss

    def forward_losses(
        self,
        inputs: dict,
        targets: torch.Tensor,
        *,
        chunk: int = 1024,
        label_smoothing: float = 0.0,
        output_loss: OutputLoss = OutputLoss.chunked,
        sparse_targets: bool = False,
        z_loss: float = 0.0,
    ) -> TokenLoss:
        """The token loss of one forward and its parts: `inputs` are the family's forward
        arguments, targets (B, T) (-100 = no target); the head runs as `token_losses`. This is
        what task.compile=true compiles whole (stack, head and loss: one graph). Under FSDP this
        is the step's one forward entry of the root unit (registered as a forward method), so
        the embeddings, stack and head are gathered and released once."""
        run = self.forward if getattr(self, "sharded", False) else self  # self(...): hooks
        hidden = run(**inputs, return_logits=False).hidden_states  # (B, T, D)
        return self.token_losses(
            hidden.reshape(-1, hidden.shape[-1]),
            targets.reshape(-1),
            chunk=chunk,
            label_smoothing=label_smoothing,
            output_loss=output_loss,
            sparse_targets=sparse_targets,
            z_loss=z_loss,
        )  # rows (B·T, D)

    def new_cache(self, capacity: int | None = None) -> Cache:
        """An empty key/value cache for decoding (a static one of `capacity` positions): the
        families that decode define it."""
        raise NotImplementedError(f"{type(self).__name__} does not decode")

    def drop_output_head(self) -> None:
        """Remove the token output head (transform, projection, bias): a task that puts its own
        head on `hidden_states` leaves no unused parameters (DDP needs that)."""
        # register_module: the head's slot stays (None), as assigning None to it does
        self.register_module("lm_head", None)
        self.head_transform = None
        self.output_bias = None

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device
