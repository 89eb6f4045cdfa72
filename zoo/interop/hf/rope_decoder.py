"""The weight layout Llama's descendants share in transformers (Qwen3, OLMo 2, Gemma 2), for
their converters: `model.embed_tokens`, per layer `self_attn.{q,k,v,o}_proj` and
`mlp.{gate,up,down}_proj`, `model.norm`, `lm_head`; no biases.

What differs between them is where their norms sit and what they are called, so a family's
converter names its norms (`layer_norms`: zoo name -> transformers name, one layer) and builds
the two configs; the rest maps here one to one, with zoo's two fusions: q, k, v are one
`qkv_proj` (rows q, then k, then v) and gate, up one `ff.w_in` (gate, then up). Every family
here pairs RoPE's dimensions as rotate-half, as zoo does, so q and k need no permutation."""

from __future__ import annotations

from collections.abc import Iterator

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import gather, load_exact, scatter
from zoo.models import build_model


class RopeDecoderConverter:
    """Base of the converters of a Llama-like causal LM; a family sets the class attributes and
    writes `matches`, `zoo_config` and `hf_config`."""

    description = ""
    model_class = ""  # the transformers *ForCausalLM class
    layer_norms: dict[str, str] = {}  # zoo name -> transformers name, both under one layer
    # Gemma's RMSNorm computes x·(1 + w) where zoo's computes x·w: zoo's weight is w + 1
    norm_offset = 0.0

    @staticmethod
    def matches(cfg) -> bool:
        raise NotImplementedError

    def zoo_config(self, config) -> ModelConfig:
        raise NotImplementedError

    def hf_config(self, cfg):
        raise NotImplementedError

    def groups(self, cfg: ModelConfig) -> Iterator[tuple[str, list[str]]]:
        """(zoo name, [transformers names]) of every weight of a model of `cfg`; the zoo tensor
        is the transformers tensors concatenated along dim 0."""
        yield "embed.weight", ["model.embed_tokens.weight"]
        yield "lm_head.weight", ["lm_head.weight"]
        yield "decoder.final_norm.weight", ["model.norm.weight"]
        for i in range(cfg.n_layers):
            z, hf = f"decoder.layers.{i}.", f"model.layers.{i}."
            yield z + "self_attn.qkv_proj.weight", [hf + f"self_attn.{p}_proj.weight" for p in "qkv"]
            yield z + "self_attn.o_proj.weight", [hf + "self_attn.o_proj.weight"]
            yield from self.ffn_groups(cfg, i, z, hf)
            for ours, theirs in self.layer_norms.items():
                yield f"{z}{ours}.weight", [f"{hf}{theirs}.weight"]

    def ffn_groups(self, cfg: ModelConfig, i: int, z: str, hf: str) -> Iterator[tuple[str, list[str]]]:
        """The feed-forward weights of layer `i` (zoo prefix `z`, transformers prefix `hf`): a
        dense SwiGLU unit here; the mixture-of-experts families map their experts instead."""
        yield z + "ff.w_in.weight", [hf + "mlp.gate_proj.weight", hf + "mlp.up_proj.weight"]
        yield z + "ff.w_out.weight", [hf + "mlp.down_proj.weight"]

    def _is_offset(self, name: str) -> bool:
        """Does the zoo weight `name` carry `norm_offset` (the final norm and the layer norms)?"""
        return self.norm_offset != 0.0 and (
            name == "decoder.final_norm.weight" or any(name.endswith(f".{ours}.weight") for ours in self.layer_norms)
        )

    def from_hf(self, hf_model):
        model = build_model(self.zoo_config(hf_model.config))
        sd = dict(hf_model.state_dict())
        sd.setdefault("lm_head.weight", sd["model.embed_tokens.weight"])  # tied: saved once
        out = gather(sd, self.groups(model.config))  # qkv: (H·Dh + 2·Hkv·Dh, D); w_in: (2·d_ff, D)
        for name in out:
            if self._is_offset(name):
                out[name] = out[name] + self.norm_offset
        load_exact(model, out)
        return model.eval()

    def to_hf(self, model):
        import transformers

        cfg = model.config
        hf = getattr(transformers, self.model_class)(self.hf_config(cfg))
        out = scatter(
            model.state_dict(),
            self.groups(cfg),
            hf,
            lambda name, t: t - self.norm_offset if self._is_offset(name) else t,
        )
        load_exact(hf, out)
        return hf.eval()
