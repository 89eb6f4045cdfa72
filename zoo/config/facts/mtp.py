"""Facts about multi-token prediction (`task.mtp_depth`, `task.mtp_weight`), in one torch-free
row: what the modules compute, the paper, the keys they read, what they add to a run (parameters,
FLOPs per token, KV cache when drafting) and what they refuse, as one-line messages.

DeepSeek-V3 (DeepSeek-AI 2024, §2.2) adds D sequential modules after the main model. Module k
(k = 1..D) reads, at position i, the previous depth's representation h^{k-1}_i (h^0: the main
model's, as its output head reads it) and the embedding of token t_{i+k}:

    h'^k_i = M_k [RMSNorm(h^{k-1}_i); RMSNorm(Emb(t_{i+k}))]      (eq. 21; M_k: 2D -> D)
    h^k_{1:T-k} = TRM_k(h'^k_{1:T-k})                              (eq. 22; one Transformer block)
    P^k_{i+k+1} = OutHead(h^k_i)                                    (eq. 23; shared with the model)
    L_MTP = (λ / D) · Σ_k CrossEntropy(P^k, t_{k+2:T+1})            (eqs. 24-25)

Emb and OutHead are the main model's own (token table; output projection with its bias, soft-cap
and μP multiplier); each module holds two norms, M_k, one block (causal self-attention over the
positions 1..T-k, the main model's position scheme, the feed-forward kind of its last layer) and
a final norm before the shared head (every placement but post-LN: DeepSeek-V3's released weights
hold one per module, `shared_head.norm`). The norms are of `model.norm_type`. The modules are
built by the causal LM task beside the model (`zoo.models.mtp`); `zoo.config.schema.params`
(`mtp_params`) and `zoo.config.schema.flops` (`mtp_flops`) count them from this row, and
`tests/models/test_mtp.py` checks both against the built modules and the equations against a
case computed by hand. There is no transformers forward of these modules to compare with."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zoo.config.errors import ConfigError
from zoo.config.facts.tasks import TaskKind

if TYPE_CHECKING:
    from zoo.config.schema.task import TaskConfig

MAX_DEPTH = 16  # DeepSeek-V3 trains with D = 1; a deeper chain than this is a typo


@dataclass(frozen=True, kw_only=True)
class MTPFacts:
    """The row of multi-token prediction.

    - `what`, `paper`: what it computes and where it comes from.
    - `keys`: the config keys it reads.
    - `parameters`: what each module holds (counted by `zoo.config.schema.params.mtp_params`).
    - `flops`: what each module adds per training token (`zoo.config.schema.flops.mtp_flops`).
    - `kv_cache`: what self-speculative decoding keeps per drafted position.
    - `tasks`: the task kinds that take it.
    """

    what: str
    paper: str
    keys: tuple[str, ...]
    parameters: str
    flops: str
    kv_cache: str
    tasks: tuple[TaskKind, ...]


MTP_FACTS = MTPFacts(
    what=(
        "D sequential modules, module k predicting token t_{i+k+1} from the previous depth's "
        "representation and the embedding of t_{i+k}; L = L_main + (λ/D)·Σ_k L_k"
    ),
    paper="DeepSeek-AI 2024, DeepSeek-V3 Technical Report, §2.2 (Gloeckle et al. 2024 for parallel heads)",
    keys=(
        "task.mtp_depth",
        "task.mtp_weight",
        "model.d_model",
        "model.norm_type",
        "model.norm",
        "model.bias",
        "model.ffn",
    ),
    parameters=(
        "per module: two norms, M_k (2D·D, + D with model.bias), one decoder block (attention, "
        "feed-forward of the last layer's kind, its norms) and a final norm (every placement but post)"
    ),
    flops="per module and training token: 2·2D·D (M_k), one block at the context, the output projection 2·D·V",
    kv_cache="self-speculative decoding: one layer's keys and values per module (2·Hkv·Dh per position)",
    tasks=(TaskKind.causal_lm,),
)


def check_mtp_task(task: TaskConfig) -> None:
    """`TaskConfig`'s own checks of task.mtp_depth and task.mtp_weight (ConfigError, one line)."""
    depth, weight = task.mtp_depth, task.mtp_weight
    if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= MAX_DEPTH:
        raise ConfigError(f"task.mtp_depth must be an integer from 0 (off) to {MAX_DEPTH}, got {depth!r}")
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= weight < math.inf:
        raise ConfigError(f"task.mtp_weight must be a number >= 0 (λ of L_MTP), got {weight!r}")
    if depth and task.kind not in MTP_FACTS.tasks:
        allowed = ", ".join(kind.value for kind in MTP_FACTS.tasks)
        raise ConfigError(
            f"task.mtp_depth={depth}: multi-token prediction trains a left-to-right language model "
            f"(task={allowed}), not task={task.kind.value}"
        )


def mtp_refusal(depth: int, *, parametrization: str, sharded: bool, document_mask: bool, seq_len: int) -> str | None:
    """The one-line refusal of task.mtp_depth=`depth` in this run, or None: what joins the task
    with the model, the trainer and the data (`zoo.config.schema.validate`)."""
    if not depth:
        return None
    if parametrization == "mup":
        return (
            f"task.mtp_depth={depth} with model.parametrization=mup: the modules' hidden matrices "
            "would not get μP's learning rates; use model.parametrization=standard"
        )
    if sharded:
        return (
            f"task.mtp_depth={depth} runs under DDP or one device; the sharded strategy (trainer=fsdp) "
            "does not shard the modules with the shared embedding and head yet"
        )
    if document_mask:
        return (
            f"task.mtp_depth={depth} with data.document_mask=true: the modules attend over the whole "
            "window; set data.document_mask=false"
        )
    if depth >= seq_len:
        return (
            f"task.mtp_depth={depth} leaves module {depth} no target in a window of data.seq_len={seq_len} "
            f"tokens; use a depth below {seq_len}"
        )
    return None
