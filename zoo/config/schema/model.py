"""Typed schema of a model architecture.

The architecture is data: every choice is an enum value, every size an integer, and
`ModelConfig.__post_init__` rejects impossible combinations with the offending numbers before
any weights exist. Hydra composes these schemas (see `zoo.config.schema.store`); `zoo.models` builds a
`torch.nn.Module` from the validated object. Nothing here imports torch.
"""

from __future__ import annotations

import enum
import math
from dataclasses import MISSING as dataclasses_missing
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from zoo.config.choice import listed
from zoo.config.errors import ConfigError
from zoo.config.facts.activations import GATED, Activation  # noqa: F401  (re-exported)
from zoo.config.facts.attention import AttentionKind, check_attention, check_mixers
from zoo.config.facts.blocks import BLOCK_FACTS, BlockKind, QKNorm, check_block, check_softcap
from zoo.config.facts.families import FAMILY_FACTS, Family
from zoo.config.facts.ffn import FFNKind, MoEGate, check_ffn, check_moe_keys
from zoo.config.facts.gated_deltanet import DEFAULT_CONV_KERNEL
from zoo.config.facts.heads import AttnGate, AttnSink, check_heads
from zoo.config.facts.kv import KVKind, check_kv
from zoo.config.facts.layers import check_every_kth
from zoo.config.facts.moe_experts import MoEExpert, check_expert
from zoo.config.facts.moe_routing import BALANCE_FACTS, DEFAULT_BIAS_RATE, MoEBalance, check_moe_routing
from zoo.config.facts.moe_shared import SHARED_GATE_FACTS, MoESharedGate, check_shared_gate
from zoo.config.facts.norms import NormType, check_norm
from zoo.config.facts.placements import PLACEMENT_FACTS, NormPlacement
from zoo.config.facts.positions import PositionKind  # noqa: F401  (re-exported)
from zoo.config.facts.residuals import (
    DEFAULT_STREAMS,
    HYPER_FACTS,
    VALUE_EMBED_FACTS,
    VALUE_RESIDUAL_FACTS,
    HyperConnections,
    ValueResidual,
    check_residuals,
)
from zoo.config.facts.rope import check_rope_pattern
from zoo.config.schema.choices import BudgetCounts, EmbedInit, Parametrization
from zoo.config.schema.frozen import Items, settle, thawed
from zoo.config.schema.position import PositionConfig
from zoo.config.schema.widths import MUP_BASE_D_MODEL, derive_base_widths, derive_d_ff, derive_heads, positive  # noqa: F401

# A width derived from the others when left out (n_kv_heads, head_dim, d_ff): a YAML file or the
# command line may give None (OmegaConf reads the Optional), and __post_init__ fills it in, so the
# type checker reads the int every built config holds.
if TYPE_CHECKING:
    Derived = int
else:
    Derived = int | None
DERIVED: Any = None  # a Derived field's default: "derive it"


@dataclass(kw_only=True, frozen=True)
class ModelConfig:
    """A Transformer architecture. Sizes follow the shape vocabulary of the code:
    D = d_model, H = n_heads, Hkv = n_kv_heads, Dh = head_dim, V = vocab_size."""

    family: Family = field(default=Family.decoder_only, metadata={"help": "architecture family"})
    position: PositionConfig = field(default_factory=PositionConfig)
    norm: NormPlacement = field(
        default=NormPlacement.pre,
        metadata={
            "help": "norm placement: "
            + "; ".join(f"{kind.value}: {row.what}" for kind, row in PLACEMENT_FACTS.items())
            + " (rows: zoo.config.facts.placements)"
        },
    )
    norm_type: NormType = field(
        default=NormType.layernorm,
        metadata={"help": "norm type (rows: zoo.config.facts.norms.NORM_FACTS)"},
    )
    norm_eps: float = 1e-5
    activation: Activation = field(
        default=Activation.gelu,
        metadata={
            "help": f"feed-forward activation: {Activation.listed()}; {listed(GATED, 'and')} are gated "
            "(rows: zoo.config.facts.activations.ACTIVATION_FACTS)"
        },
    )
    ffn: FFNKind = field(
        default=FFNKind.dense,
        metadata={
            "help": "feed-forward kind: dense, one unit for every token; moe, a mixture of "
            "experts (model.moe_* keys) (rows: zoo.config.facts.ffn.FFN_FACTS)"
        },
    )
    d_model: int = field(default=256, metadata={"help": "D, residual width"})
    n_heads: int = field(default=4, metadata={"help": "H, query heads"})
    n_kv_heads: Derived = field(
        default=DERIVED,
        metadata={"help": "Hkv, key/value heads (GQA; 1 = MQA); default: n_heads"},
    )
    head_dim: Derived = field(default=DERIVED, metadata={"help": "Dh; default: D / H"})
    n_layers: int = field(default=4, metadata={"help": "layers (encoder-decoder: encoder layers)"})
    n_decoder_layers: int | None = field(
        default=None, metadata={"help": "encoder-decoder: decoder layers; default: n_layers"}
    )
    d_ff: Derived = field(
        default=DERIVED,
        metadata={
            "help": "feed-forward hidden width; default 4·D, or 8/3·D rounded up to a "
            "multiple of 64 for gated activations (same parameter count)"
        },
    )
    ff_mult: float | None = field(
        default=None,
        metadata={
            "help": "feed-forward hidden width as a multiple of D: d_ff = round(ff_mult·D), "
            "the same rule at every size (x-transformers' ff_mult); instead of model.d_ff"
        },
    )
    param_budget: int | None = field(
        default=None,
        metadata={
            "help": "size d_ff so the model has this many non-embedding parameters "
            "(matched-budget ablations); instead of model.d_ff"
        },
    )
    vocab_size: int = field(default=8192, metadata={"help": "V"})
    max_seq_len: int = field(default=256, metadata={"help": "longest sequence (learned positions: table size)"})
    dropout: float = 0.0
    tie_embeddings: bool = field(
        default=True, metadata={"help": "share the input embedding with the output projection"}
    )
    bias: bool = field(default=True, metadata={"help": "biases in linear layers and LayerNorm"})
    scale_embeddings: bool = field(
        default=False, metadata={"help": "multiply token embeddings by sqrt(D) (Vaswani et al.)"}
    )
    embed_norm: bool = field(
        default=False,
        metadata={"help": "normalize token + position embeddings before the first layer (BERT)"},
    )
    token_types: int = field(
        default=0,
        metadata={"help": "token-type (segment) embeddings added to the token embeddings (BERT: 2); 0 = none"},
    )
    attention_scale: float | None = field(
        default=None,
        metadata={
            "help": "multiplier of the attention scores q·kᵀ; default 1/sqrt(Dh) "
            "(Vaswani et al.); T5: 1.0 (its initialisation folds the scale into W_q)"
        },
    )
    head_transform: bool = field(
        default=False,
        metadata={"help": "dense D->D, activation and norm before the output projection (BERT's masked-LM head)"},
    )
    scale_output: bool = field(
        default=False,
        metadata={
            "help": "multiply the final hidden states by D^-0.5 before the output "
            "projection (T5 v1.0 with tied embeddings; Mesh TensorFlow)"
        },
    )
    output_bias: bool = field(
        default=False,
        metadata={"help": "a learned bias (V) on the output logits (BERT's decoder bias, BART's final_logits_bias)"},
    )
    init_std: float = field(
        default=0.02, metadata={"help": "std of the normal initialisation of every matrix and embedding table"}
    )
    embed_init: EmbedInit = field(
        default=EmbedInit.std,
        metadata={
            "help": "how the token embeddings start: std (Normal(0, init_std)) or unit (Normal(0, "
            "D^-0.5): with scale_embeddings they start at unit RMS, the size of a sinusoid's, as in "
            "Vaswani et al. and fairseq)"
        },
    )
    parametrization: Parametrization = field(
        default=Parametrization.standard,
        metadata={
            "help": "standard, or mup: Maximal Update Parametrization (Yang et al. 2022, Tensor "
            "Programs V), hyperparameters tuned at the base width mup_base_d_model carry over to "
            "wider models; with m = d_model / mup_base_d_model, hidden matrices start at "
            "init_std/sqrt(m) and learn at optim.lr/m (weight decay x m), the logits are x 1/m, "
            "attention scores x sqrt(base Dh)/Dh; equal to standard at m = 1"
        },
    )
    mup_base_d_model: int | None = field(
        default=None,
        metadata={
            "help": f"mup: the width the hyperparameters are tuned at (m = d_model / "
            f"mup_base_d_model); default {MUP_BASE_D_MODEL}"
        },
    )
    mup_base_head_dim: int | None = field(
        default=None,
        metadata={
            "help": "mup: the base model's head width Dh (attention scores x sqrt(base Dh)/Dh); "
            "default head_dim / m (the base model has as many heads, each narrower); set it "
            "to head_dim when the width grows by adding heads"
        },
    )
    block: BlockKind = field(
        default=BlockKind.sequential,
        metadata={
            "help": "; ".join(f"{kind.value}: {row.what}" for kind, row in BLOCK_FACTS.items())
            + " (rows: zoo.config.facts.blocks.BLOCK_FACTS)"
        },
    )
    qk_norm: QKNorm = field(
        default=QKNorm.none,
        metadata={
            "help": f"norm of queries and keys before the position scheme's rotation: {QKNorm.listed()} "
            "(head: over each head's Dh, Qwen3; projection: over the whole H·Dh and Hkv·Dh, "
            "OLMo 2); self- and cross-attention alike (rows: zoo.config.facts.blocks.QK_NORM_FACTS)"
        },
    )
    qk_norm_type: NormType | None = field(
        default=None,
        metadata={"help": f"the QK-norm's type ({NormType.listed()}); null: model.norm_type"},
    )
    attn_softcap: float | None = field(
        default=None,
        metadata={
            "help": "cap c of the attention scores, c·tanh(s/c) after scaling, before the position "
            "bias and the mask (Gemma 2: 50); runs attention's math path, not SDPA's fused "
            "kernels; null: no cap"
        },
    )
    final_softcap: float | None = field(
        default=None,
        metadata={
            "help": "cap c of the output logits, c·tanh(z/c), in training, validation and "
            "generation (Gemma 2: 30); null: no cap"
        },
    )
    checkpoint_activations: bool = field(
        default=False,
        metadata={
            "help": "recompute each layer's activations in backward instead of keeping "
            "them (Chen et al. 2016): less memory in training, ~1/3 more compute"
        },
    )
    attention: AttentionKind = field(
        default=AttentionKind.full,
        metadata={
            "help": f"self-attention variant: {AttentionKind.listed()} (sliding: local attention, each "
            "query sees model.window keys; Mistral 7B, Gemma 2; gated_deltanet: a recurrent layer of "
            "fixed-size state, Qwen3-Next) (rows: zoo.config.facts.attention.ATTENTION_FACTS)"
        },
    )
    window: int | None = field(
        default=None,
        metadata={
            "help": "sliding: the keys a query sees, itself included (transformers' "
            "sliding_window: causal query i sees keys i-window+1..i; an encoder sees "
            "(window-1)/2 each side, so odd there); required for sliding, refused for full"
        },
    )
    global_every: int | None = field(
        default=None,
        metadata={
            "help": "sliding or a recurrent kind: every k-th layer is full, the layers i with (i+1) mod k "
            "= 0, as Gemma 2 (k=2) and Gemma 3 (k=6) layer_types, Qwen3-Next's hybrid (k=4); null = "
            "every layer of model.attention's kind"
        },
    )
    param_budget_counts: BudgetCounts = field(
        default=BudgetCounts.total,
        metadata={
            "help": "which non-embedding parameters model.param_budget matches: total (all the model "
            "holds) or active (those one token passes through: under model.ffn=moe the router, the "
            "top-k and the shared experts; the same as total for a dense model)"
        },
    )
    moe_experts: int = field(default=8, metadata={"help": "moe: E, routed experts per mixture layer"})
    moe_top_k: int = field(default=2, metadata={"help": "moe: experts each token is routed to (token choice)"})
    moe_d_ff: int | None = field(
        default=None,
        metadata={
            "help": "moe: hidden width of each expert (and each shared expert); null = model.d_ff "
            "(fine-grained experts: smaller, with more experts and a larger top-k)"
        },
    )
    moe_shared: int = field(
        default=0,
        metadata={
            "help": "moe: shared experts every token passes through beside its routed ones "
            "(DeepSeekMoE, Qwen-MoE), each model.moe_d_ff wide (held as one dense unit); 0 = none"
        },
    )
    moe_gate: MoEGate = field(
        default=MoEGate.softmax,
        metadata={
            "help": "moe: router gate, softmax over the E logits (Mixtral, OLMoE) or a sigmoid per "
            "expert (DeepSeek-V3); the top-k of its scores are picked"
        },
    )
    moe_renorm: bool = field(
        default=True,
        metadata={
            "help": "moe: renormalise the top-k weights of a token to sum to 1 (Mixtral; OLMoE and "
            "Qwen-MoE do not); false keeps the gate's scores as they are"
        },
    )
    moe_capacity: float | None = field(
        default=None,
        metadata={
            "help": "moe: capacity factor c, each expert takes at most ceil(c·N·k/E) of a forward's "
            "N·k routed slots (first come, in token order); the others are dropped (the token "
            "passes on through the residual) and counted; in training only (evaluation and generation are "
            "dropless); null = dropless"
        },
    )
    moe_every: int = field(
        default=1,
        metadata={
            "help": "moe: the layers i with (i+1) % k == 0 are mixtures, the others dense "
            "(model.d_ff wide); 1 = every layer"
        },
    )
    # model.kv: per-head keys and values, or multi-head latent attention (zoo.config.facts.kv)
    kv: KVKind = field(
        default=KVKind.heads,
        metadata={
            "help": f"where self-attention's keys and values come from: {KVKind.listed()} (heads: "
            "per-head projections, n_kv_heads of them; latent: multi-head latent attention, "
            "DeepSeek-V2/V3, a low-rank latent per token and a shared RoPE key, model.*_rank and "
            "model.*_head_dim keys) (rows: zoo.config.facts.kv.KV_FACTS)"
        },
    )
    q_lora_rank: int | None = field(
        default=None,
        metadata={"help": "latent: the queries' low-rank width (DeepSeek-V3: 1536); null = one query projection"},
    )
    kv_lora_rank: int | None = field(
        default=None,
        metadata={"help": "latent: r, the key/value latent each position caches; default 4·head_dim"},
    )
    qk_nope_head_dim: int | None = field(
        default=None, metadata={"help": "latent: each head's key and query width without RoPE; default head_dim"}
    )
    qk_rope_head_dim: int | None = field(
        default=None,
        metadata={
            "help": "latent: the width of the key shared by the heads and of each query's part that "
            "RoPE rotates; default head_dim / 2"
        },
    )
    v_head_dim: int | None = field(default=None, metadata={"help": "latent: each head's value width; default head_dim"})
    # moe balancing and DeepSeek-V3's routing (rows: zoo.config.facts.moe_routing)
    moe_balance: MoEBalance = field(
        default=MoEBalance.aux_loss,
        metadata={
            "help": "moe: how the experts' loads are kept even: "
            + "; ".join(f"{kind.value}: {row.what}" for kind, row in BALANCE_FACTS.items())
            + " (rows: zoo.config.facts.moe_routing.BALANCE_FACTS)"
        },
    )
    moe_bias_rate: float = field(
        default=DEFAULT_BIAS_RATE,
        metadata={"help": "moe_balance=bias: u, the step of each bias update (DeepSeek-V3: 0.001)"},
    )
    moe_groups: int = field(
        default=1,
        metadata={
            "help": "moe: G, groups of E/G experts; each token picks its top-k within the model.moe_top_groups "
            "groups whose two best scores sum highest (DeepSeek-V3's n_group: 8); 1 = no groups"
        },
    )
    moe_top_groups: int = field(
        default=1,
        metadata={"help": "moe: the groups a token's experts come from (DeepSeek-V3's topk_group: 4); <= moe_groups"},
    )
    moe_scale: float = field(
        default=1.0,
        metadata={
            "help": "moe: multiplier of the routed experts' weights, after renormalisation "
            "(DeepSeek-V3's routed_scaling_factor: 2.5)"
        },
    )
    moe_first_dense: int = field(
        default=0,
        metadata={
            "help": "moe: the first k layers of each stack stay dense, model.d_ff wide "
            "(DeepSeek-V3's first_k_dense_replace: 3); 0 = none"
        },
    )
    # attention sink and output gate (rows: zoo.config.facts.heads)
    attn_sink: AttnSink = field(
        default=AttnSink.none,
        metadata={
            "help": f"a sink logit in each head's softmax denominator: {AttnSink.listed()} (learned: one "
            "per head, gpt-oss; off_by_one: fixed at 0, Miller 2023); one zero key/value column more "
            "per query (rows: zoo.config.facts.heads.SINK_FACTS)"
        },
    )
    attn_gate: AttnGate = field(
        default=AttnGate.none,
        metadata={
            "help": f"a sigmoid gate on each head's output before W_o, sigmoid(x W_g): {AttnGate.listed()} "
            "(headwise: one per head, W_g D×H; elementwise: one per head dimension, W_g D×H·Dh; Qiu et "
            "al. 2025, Qwen3-Next) (rows: zoo.config.facts.heads.GATE_FACTS)"
        },
    )
    # the kind of expert a mixture holds (rows: zoo.config.facts.moe_experts)
    moe_expert: MoEExpert = field(
        default=MoEExpert.plain,
        metadata={
            "help": f"moe: the experts' kind, {MoEExpert.listed()} (plain: no biases, model.activation; "
            "gpt_oss: router and experts with biases, gpt-oss's clamped SwiGLU) "
            "(rows: zoo.config.facts.moe_experts.EXPERT_FACTS)"
        },
    )
    # value residual, value embeddings, hyper-connections (rows: zoo.config.facts.residuals)
    value_residual: ValueResidual = field(
        default=ValueResidual.none,
        metadata={
            "help": "; ".join(f"{kind.value}: {row.what}" for kind, row in VALUE_RESIDUAL_FACTS.items())
            + " (rows: zoo.config.facts.residuals.VALUE_RESIDUAL_FACTS)"
        },
    )
    value_embeds: int = field(
        default=0,
        metadata={"help": f"value embeddings, k tables (0 = none): {VALUE_EMBED_FACTS.what}"},
    )
    hyper_connections: HyperConnections = field(
        default=HyperConnections.none,
        metadata={
            "help": "; ".join(f"{kind.value}: {row.what}" for kind, row in HYPER_FACTS.items())
            + " (rows: zoo.config.facts.residuals.HYPER_FACTS)"
        },
    )
    residual_streams: Derived = field(
        default=DERIVED,
        metadata={
            "help": f"n, the residual streams of model.hyper_connections; default {DEFAULT_STREAMS} with "
            f"hyper-connections, 1 (the plain residual, the only value) with model.hyper_connections="
            f"{HyperConnections.none.value}"
        },
    )
    # model.moe_shared_gate: a sigmoid gate on the shared experts (rows: zoo.config.facts.moe_shared)
    moe_shared_gate: MoESharedGate = field(
        default=MoESharedGate.none,
        metadata={
            "help": "moe: the shared experts' output "
            + "; ".join(f"{kind.value}: {row.what}" for kind, row in SHARED_GATE_FACTS.items())
            + " (rows: zoo.config.facts.moe_shared.SHARED_GATE_FACTS)"
        },
    )

    # model.attention=mamba2: Mamba 2's SSD mixer (rows: zoo.config.facts.mamba2)
    ssm_state: int = field(default=128, metadata={"help": "mamba2: N, the state width of each head (d_state)"})
    ssm_heads: int | None = field(
        default=None,
        metadata={"help": "mamba2: H, the SSM heads; null = ssm_expand·D / ssm_head_dim"},
    )
    ssm_head_dim: int = field(default=64, metadata={"help": "mamba2: P, each SSM head's width (headdim)"})
    ssm_groups: int = field(
        default=1,
        metadata={"help": "mamba2: G, groups of heads sharing B and C (and one norm group each; n_groups)"},
    )
    ssm_expand: int = field(default=2, metadata={"help": "mamba2: the inner width E = ssm_expand·D"})
    ssm_chunk: int = field(
        default=256,
        metadata={"help": "mamba2: Q, the positions of one chunk of the chunked (SSD) training form"},
    )

    # recurrent mixers and layer patterns (rows: zoo.config.facts.attention; Gated DeltaNet's
    # widths: zoo.config.facts.gated_deltanet)
    layer_pattern: Items[str] | None = field(
        default=None,
        metadata={
            "help": f"each layer's kind, a list of {AttentionKind.listed()} tiled over each stack "
            "(its length divides the depth), e.g. three recurrent layers then one full (Qwen3-Next); "
            "sliding entries take model.window; instead of model.attention and model.global_every; "
            "null = model.attention everywhere"
        },
    )
    linear_key_heads: int | None = field(
        default=None, metadata={"help": "gated_deltanet: Hk, its query/key heads; default model.n_heads"}
    )
    linear_value_heads: int | None = field(
        default=None,
        metadata={"help": "gated_deltanet: Hv, its value heads, a multiple of Hk (Qwen3-Next: 2·Hk); default Hk"},
    )
    linear_key_dim: int | None = field(
        default=None, metadata={"help": "gated_deltanet: dk, each query/key head's width; default model.head_dim"}
    )
    linear_value_dim: int | None = field(
        default=None, metadata={"help": "gated_deltanet: dv, each value head's width; default dk"}
    )
    conv_kernel: int = field(
        default=DEFAULT_CONV_KERNEL,
        metadata={
            "help": "recurrent layers: width of the short causal convolution over their inputs "
            "(Qwen3-Next's linear_conv_kernel_dim, Mamba 2's d_conv)"
        },
    )

    def __post_init__(self) -> None:
        if isinstance(self.position, dict):
            settle(self, "position", PositionConfig(**self.position))
        elif not isinstance(self.position, PositionConfig):
            raise ConfigError(f"model.position must be a mapping, got {type(self.position).__name__}")
        settle(self, "family", Family.parse(self.family, "model.family"))
        settle(self, "norm", NormPlacement.parse(self.norm, "model.norm"))
        settle(self, "norm_type", NormType.parse(self.norm_type, "model.norm_type"))
        settle(self, "activation", Activation.parse(self.activation, "model.activation"))
        settle(self, "ffn", FFNKind.parse(self.ffn, "model.ffn"))
        settle(self, "parametrization", Parametrization.parse(self.parametrization, "model.parametrization"))
        settle(self, "block", BlockKind.parse(self.block, "model.block"))
        settle(self, "qk_norm", QKNorm.parse(self.qk_norm, "model.qk_norm"))
        if self.qk_norm_type is not None:
            settle(self, "qk_norm_type", NormType.parse(self.qk_norm_type, "model.qk_norm_type"))
        check_block(self)
        for cap in ("attn_softcap", "final_softcap"):
            settle(self, cap, check_softcap(cap, getattr(self, cap)))

        derive_heads(self)
        settle(self, "moe_gate", MoEGate.parse(self.moe_gate, "model.moe_gate"))
        check_moe_keys(self)
        settle(self, "param_budget_counts", BudgetCounts.parse(self.param_budget_counts, "model.param_budget_counts"))
        derive_d_ff(self)
        check_norm(self)
        check_ffn(self)
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"model.dropout must be in [0, 1), got {self.dropout}")
        if not 0 < self.norm_eps < 1:  # an eps of 1 or more swamps every variance it is added to
            raise ConfigError(f"model.norm_eps must be in (0, 1), got {self.norm_eps}")
        if not isinstance(self.token_types, int) or isinstance(self.token_types, bool) or self.token_types < 0:
            raise ConfigError(f"model.token_types must be an integer >= 0, got {self.token_types!r}")
        if self.attention_scale is not None and not self.attention_scale > 0:
            raise ConfigError(f"model.attention_scale must be > 0 (or null for 1/sqrt(Dh)), got {self.attention_scale}")
        if self.init_std <= 0:
            raise ConfigError(f"model.init_std must be > 0, got {self.init_std}")
        settle(self, "embed_init", EmbedInit.parse(self.embed_init, "model.embed_init"))
        derive_base_widths(self)
        settle(self, "attention", AttentionKind.parse(self.attention, "model.attention"))
        check_attention(self)
        check_every_kth(self)  # model.global_every, model.moe_every: within each stack's depth
        check_kv(self, settle)  # model.kv and the latent widths (zoo.config.facts.kv)
        settle(self, "moe_balance", check_moe_routing(self))  # moe balancing and DeepSeek-V3's routing
        for name, kind in {**check_heads(self), **check_expert(self)}.items():  # attn_sink, attn_gate, moe_expert
            settle(self, name, kind)
        check_residuals(self, settle)  # model.value_residual, value_embeds, hyper_connections, residual_streams
        check_rope_pattern(self)  # model.position: partial rotation, NoPE interval, local base
        for name, kind in check_shared_gate(self).items():  # model.moe_shared_gate
            settle(self, name, kind)
        check_mixers(self, settle)  # model.layer_pattern, recurrent layers' refusals and widths

    @property
    def embedding_std(self) -> float:
        """The std the token embeddings start at: init_std, or with embed_init=unit D^-0.5 (so
        x·sqrt(D) starts at unit RMS under scale_embeddings: Vaswani et al. 2017 §3.4 with
        fairseq's initialisation; under mup D is the base width, see `base_d_model`)."""
        return self.base_d_model**-0.5 if self.embed_init == EmbedInit.unit else self.init_std

    # -- width (model.parametrization) ----------------------------------------------------
    @property
    def width_mult(self) -> float:
        """m = D / base D under mup (Yang et al. 2022); 1.0 under standard."""
        if self.parametrization == Parametrization.mup:
            return self.d_model / self.base_d_model
        return 1.0

    @property
    def base_d_model(self) -> int:
        """The width at which the multipliers standard takes from D are read: the sqrt(D) of
        scale_embeddings and its D^-0.5 initialisation, scale_output's D^-0.5 and inverse_sqrt's
        D^-0.5. D under standard; under mup the base width, so that these stay the base model's
        and μP's own rules alone scale with the width."""
        mup = self.parametrization == Parametrization.mup
        return self.mup_base_d_model if mup and self.mup_base_d_model is not None else self.d_model

    @property
    def decoder_layers(self) -> int:
        """An encoder-decoder's decoder depth: n_decoder_layers, which __post_init__ fills in
        with n_layers when left out."""
        return self.n_layers if self.n_decoder_layers is None else self.n_decoder_layers

    @property
    def base_head_dim(self) -> float:
        """The base model's Dh: mup_base_head_dim, or by default Dh / m (as many heads as here)."""
        if self.parametrization == Parametrization.standard:
            return self.head_dim
        if self.mup_base_head_dim is not None:
            return self.mup_base_head_dim
        return self.head_dim * self.base_d_model / self.d_model

    @property
    def attention_multiplier(self) -> float | None:
        """The multiplier of q·kᵀ; None: 1/sqrt(Dh). Under mup, scores scale as 1/Dh (μP, Yang et
        al. 2022 §4) and equal the base model's at the base head width: attention_scale (or
        1/sqrt(base Dh)) x base Dh / Dh, which is sqrt(base Dh)/Dh by default."""
        base = self.base_head_dim
        if base == self.head_dim:
            return self.attention_scale
        at_base = self.attention_scale if self.attention_scale is not None else 1.0 / math.sqrt(base)
        return at_base * (base / self.head_dim)

    @property
    def output_multiplier(self) -> float:
        """What the output projection's input is multiplied by: scale_output's D^-0.5 (1 without
        it), divided by m under mup (μP's readout multiplier, mup's MuReadout: the logits x 1/m)."""
        scaled = self.base_d_model**-0.5 if self.scale_output else 1.0
        return scaled / self.width_mult

    @property
    def embedding_multiplier(self) -> float:
        """What the token embeddings are multiplied by: sqrt(D) with scale_embeddings (base D
        under mup: the embeddings are input weights, their scale and initialisation stay the base
        model's), else 1."""
        return math.sqrt(self.base_d_model) if self.scale_embeddings else 1.0

    @property
    def qk_norm_kind(self) -> NormType:
        """The type of the QK-norm's norms: model.qk_norm_type, or by default model.norm_type."""
        return self.qk_norm_type if self.qk_norm_type is not None else self.norm_type

    @property
    def is_causal(self) -> bool:
        """Whether the model's output stack is autoregressive (decoder side)."""
        return FAMILY_FACTS[self.family].decoder

    def to_dict(self) -> dict:
        """Plain data (str/int/float/bool/None), as stored in checkpoints."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, PositionConfig):
                value = {p.name: _plain(getattr(value, p.name)) for p in fields(value)}
            out[f.name] = _plain(value)
        return out


def _plain(value):
    return value.value if isinstance(value, enum.Enum) else thawed(value)


def model_defaults() -> dict:
    """The model schema's keys that have a fixed default, as plain data: a key added to the
    schema keeps, at its default, the behaviour of the versions before it (a checkpoint or run
    record that predates it ran that way)."""
    return {f.name: _plain(f.default) for f in fields(ModelConfig) if f.default is not dataclasses_missing}
