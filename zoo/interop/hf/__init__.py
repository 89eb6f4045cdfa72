"""Hugging Face `transformers` models <-> zoo models, with the same outputs.

    from zoo.interop.hf import from_hf, to_hf
    model = from_hf(transformers_model)   # a zoo model, same forward contract as zoo.build_model
    back = to_hf(model)                   # a transformers model of the matching family

Supported: Llama (RoPE, RMSNorm, SwiGLU, grouped-query attention), GPT-2 (learned positions,
pre-LN, tanh GELU, tied), BERT (learned positions + token types, post-LN, masked-LM head),
T5 v1.0 and v1.1 (bucketed relative bias, pre-RMSNorm, unscaled attention, ReLU or gated GELU)
and BART (learned positions with an offset, post-LN encoder-decoder, embedding LayerNorm);
Qwen3 (Llama with QK-norm per head), Gemma 2 (norms before and after each sublayer, soft-capped
attention and logits, sliding-window layers between global ones, scaled embeddings), OLMo 2
(norms after the sublayers, QK-norm over the whole projection) and GPT-NeoX (attention and
feed-forward in parallel from two norms); and the mixtures of experts Mixtral (Llama's block),
OLMoE (QK-norm over the projection) and Qwen3-MoE (Qwen3's block, mixtures in every k-th
layer), their routers and stacked experts as zoo's `model.ffn=moe` holds them; SmolLM3 (Llama
with no positions in every k-th layer); DeepSeek-V3 (multi-head latent attention); and gpt-oss
(attention biases and sinks, sliding/full layers, experts with biases and a clamped SwiGLU:
`model.moe_expert=gpt_oss`); Qwen3-Next (zero-centred norms, gated attention with QK-norm and partial
RoPE, Gated DeltaNet layers between every k-th, experts with a gated shared expert). A config field
the converter cannot reproduce exactly (an unknown RoPE scaling, a bias on some projections
only, ...) raises `UnsupportedConfig` naming it, instead of building a different model.
`transformers` is imported only here.

Each family's module holds its converter as data, a `zoo.interop.hf.table.Family`: the zoo
composition it reproduces, its config fields and its weights as rows (transformers names <->
zoo name, with a named transform); `zoo.interop.hf.table.Converter` reads every one of them.
"""

from __future__ import annotations

from typing import Any

from zoo.interop.hf.bamba import BAMBA
from zoo.interop.hf.bart import BART
from zoo.interop.hf.bert import BERT
from zoo.interop.hf.common import UnsupportedConfig
from zoo.interop.hf.deepseek_v3 import DEEPSEEK_V3
from zoo.interop.hf.gemma2 import GEMMA2
from zoo.interop.hf.gpt2 import GPT2
from zoo.interop.hf.gpt_neox import GPT_NEOX
from zoo.interop.hf.gpt_oss import GPT_OSS
from zoo.interop.hf.llama import LLAMA
from zoo.interop.hf.mixtral import MIXTRAL
from zoo.interop.hf.olmo2 import OLMO2
from zoo.interop.hf.olmoe import OLMOE
from zoo.interop.hf.qwen3 import QWEN3
from zoo.interop.hf.qwen3moe import QWEN3_MOE
from zoo.interop.hf.qwen3next import QWEN3_NEXT
from zoo.interop.hf.smollm3 import SMOLLM3
from zoo.interop.hf.t5 import T5
from zoo.interop.hf.table import Converter

# model_type of the transformers config -> its converter (export tries them in this order)
FAMILIES = (
    LLAMA,
    GPT2,
    BERT,
    T5,
    BART,
    QWEN3,
    GEMMA2,
    OLMO2,
    GPT_NEOX,
    MIXTRAL,
    OLMOE,
    QWEN3_MOE,
    SMOLLM3,
    DEEPSEEK_V3,
    GPT_OSS,
    QWEN3_NEXT,
    BAMBA,
)
CONVERTERS = {family.model_type: Converter(family) for family in FAMILIES}


def from_hf(hf_model: Any) -> Any:
    """A zoo model with the weights of `hf_model` (a transformers PreTrainedModel with a
    language-model head: *ForCausalLM, BertForMaskedLM, *ForConditionalGeneration), in eval
    mode."""
    kind = getattr(hf_model.config, "model_type", None)
    if kind not in CONVERTERS:
        raise UnsupportedConfig(f"model_type={kind!r}: no converter; supported: {', '.join(CONVERTERS)}")
    if hf_model.get_output_embeddings() is None:
        raise UnsupportedConfig(
            f"{type(hf_model).__name__} has no language-model head; load the model with "
            f"AutoModelForCausalLM, AutoModelForMaskedLM or AutoModelForSeq2SeqLM"
        )
    return CONVERTERS[kind].from_hf(hf_model)


def to_hf(model: Any) -> Any:
    """The transformers model whose family matches the zoo `model`'s composition."""
    for converter in CONVERTERS.values():
        if converter.matches(model.config):
            return converter.to_hf(model)
    raise UnsupportedConfig(
        "this composition matches no supported Hugging Face family "
        f"({', '.join(c.description for c in CONVERTERS.values())})"
    )


__all__ = ["from_hf", "to_hf", "UnsupportedConfig", "CONVERTERS"]
