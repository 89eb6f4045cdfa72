"""gpt-oss (OpenAI 2025) <-> zoo's `gpt_oss` composition: decoder-only, RoPE, pre-norm RMSNorm,
grouped-query attention with biases and a learned sink per head, sliding-window layers
alternating with full ones, and a mixture of experts in every layer whose router and experts
have biases and whose unit is gpt-oss's clamped SwiGLU.

What transformers computes (`GptOssForCausalLM`), and what it is in zoo:
- `self_attn.sinks` (H): the softmax over [scores, s_h], the sink column dropped:
  `model.attn_sink=learned` (`self_attn.sink.logits`);
- q, k, v, o with biases (`attention_bias`): `model.bias=true` (zoo's RMSNorm has no bias
  whatever model.bias says, and every layer here is a mixture);
- `layer_types` (sliding then full by default) and `sliding_window` W: `model.attention=sliding
  model.window=W model.global_every=k` as for Gemma 2 (`zoo.interop.hf.gemma2.pattern`);
- the router (`mlp.router.weight`, `.bias`) takes the top k logits and their softmax: zoo's
  softmax renormalised over the top k, `model.moe_renorm=true`, with the router's bias;
- the experts (`mlp.experts.gate_up_proj` (E, D, 2·F) with the gate and up columns interleaved,
  gate at the even ones; `gate_up_proj_bias` (E, 2·F) alike; `down_proj` (E, F, D),
  `down_proj_bias` (E, D)) with the clamped SwiGLU (`swiglu_alpha` 1.702, `swiglu_limit` 7.0):
  `model.moe_expert=gpt_oss` (`zoo.nn.gpt_oss_experts`), zoo's w_in (E, 2·F, D) the gate rows then the
  up rows, w_out (E, D, F).

RoPE: gpt-oss's released configs extend its context with YaRN (`rope_type` "yarn", factor 32);
zoo reads the default and linear rules only (`zoo.interop.hf.common.rope_of`) and refuses YaRN on
one line; a config with `rope_parameters={"rope_type": "default", "rope_theta": ...}` converts.
Not converted (training-time settings): `router_aux_loss_coef` (zoo's `task.moe_balance`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from zoo.config.facts.attention import AttentionKind
from zoo.config.facts.ffn import expert_width
from zoo.config.facts.moe_experts import SWIGLU_ALPHA, SWIGLU_LIMIT
from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import ANY, require
from zoo.interop.hf.experts import moe_options
from zoo.interop.hf.gemma2 import FULL, layer_kinds, pattern
from zoo.interop.hf.rope_decoder import LLAMA_BLOCK, LLAMA_NORMS, hf_keys, norm_rows, zoo_keys
from zoo.interop.hf.table import WB, Family, Stack, Table, Transform, fields, row

ROUTER_FIELDS = fields("moe_experts num_local_experts", "moe_top_k num_experts_per_tok")


def _swap(t: torch.Tensor) -> torch.Tensor:
    """(..., a, b) -> (..., b, a) (a vector as it is)."""
    return t.transpose(-2, -1).contiguous() if t.dim() >= 2 else t


def _unpaired(t: torch.Tensor) -> torch.Tensor:
    """(..., 2·F) with gate, up interleaved (gate at the even places) -> (..., 2·F): the gate's, then the up's."""
    return torch.cat([t[..., 0::2], t[..., 1::2]], dim=-1)


def _paired(t: torch.Tensor) -> torch.Tensor:
    """The inverse of `_unpaired`: (..., 2·F) gate then up -> interleaved."""
    gate, up = t.chunk(2, dim=-1)  # (..., F) each
    return torch.stack([gate, up], dim=-1).reshape(t.shape)  # (..., 2·F)


# gate_up_proj (E, D, 2·F), interleaved <-> w_in (E, 2·F, D), the gate rows then the up rows
GATE_UP = Transform("gate_up_interleaved", lambda t, cfg: _swap(_unpaired(t)), lambda t, cfg: _paired(_swap(t)))
# gate_up_proj_bias (E, 2·F), interleaved <-> b_in (E, 2·F), the gate's then the up's
GATE_UP_BIAS = Transform("gate_up_bias_interleaved", lambda t, cfg: _unpaired(t), lambda t, cfg: _paired(t))
# down_proj (E, F, D) <-> w_out (E, D, F)
TRANSPOSED = Transform("transposed", lambda t, cfg: _swap(t), lambda t, cfg: _swap(t))

LAYER = (
    row("self_attn.qkv_proj", *(f"self_attn.{p}_proj" for p in "qkv"), suffixes=WB),
    row("self_attn.o_proj", "self_attn.o_proj", suffixes=WB),
    row("self_attn.sink.logits", "self_attn.sinks"),
    row("ff.router", "mlp.router", suffixes=WB),
    row("ff.experts.w_in", "mlp.experts.gate_up_proj", transform=GATE_UP),
    row("ff.experts.b_in", "mlp.experts.gate_up_proj_bias", transform=GATE_UP_BIAS),
    row("ff.experts.w_out", "mlp.experts.down_proj", transform=TRANSPOSED),
    row("ff.experts.b_out", "mlp.experts.down_proj_bias"),
    *norm_rows(LLAMA_NORMS),
)
TABLE = Table(
    embed="model.embed_tokens.weight",
    top=(row("decoder.final_norm.weight", "model.norm.weight"),),
    stacks=(Stack("decoder.layers.{i}.", "model.layers.{i}.", LAYER),),
)


def gpt_oss_keys(config: Any) -> dict[str, Any]:
    require(config, "hidden_act", "silu")
    require(config, "attention_bias", True, "zoo's gpt_oss composition has biases on q, k, v and o")
    require(config, "swiglu_alpha", SWIGLU_ALPHA, "zoo's gpt-oss experts use its alpha")
    require(config, "swiglu_limit", SWIGLU_LIMIT, "zoo's gpt-oss experts use its limit")
    layers = pattern(list(config.layer_types), config.num_hidden_layers, config)
    if layers["attention"] == "sliding":
        layers["window"] = config.sliding_window
    experts = {"ffn": "moe", **ROUTER_FIELDS.read(config), "moe_renorm": True, "moe_expert": "gpt_oss"}
    return zoo_keys(config, bias=True, attn_sink="learned", **experts, **layers)


def gpt_oss_hf_keys(cfg: ModelConfig) -> dict[str, Any]:
    sliding = cfg.attention.value == "sliding"
    return hf_keys(
        cfg,
        attention_bias=True,
        intermediate_size=expert_width(cfg, cfg.d_ff),
        sliding_window=cfg.window if sliding else cfg.max_seq_len,  # read by no layer, but read
        layer_types=layer_kinds(cfg.n_layers, cfg.global_every) if sliding else [FULL] * cfg.n_layers,
        swiglu_alpha=SWIGLU_ALPHA,
        swiglu_limit=SWIGLU_LIMIT,
        **ROUTER_FIELDS.write(cfg),
    )


NAMES = ("gpt_oss", "GptOssForCausalLM", "GptOssConfig")
DESCRIPTION = (
    "gpt_oss: decoder-only, rope, pre-norm rmsnorm, attention biases and learned sinks, "
    f"{AttentionKind.sliding.value} and {AttentionKind.full.value} layers, a mixture of gpt-oss experts in every "
    "layer (router and expert biases, clamped swiglu)"
)
OPTIONS = moe_options(
    moe_renorm=(True,),
    moe_expert=("gpt_oss",),
    attn_sink=("learned",),
    attention=ANY,
    window=ANY,
    global_every=ANY,
)
COMPOSITION = replace(LLAMA_BLOCK, bias=True, options=OPTIONS)
GPT_OSS = Family(NAMES, DESCRIPTION, COMPOSITION, (gpt_oss_keys, gpt_oss_hf_keys), TABLE)
