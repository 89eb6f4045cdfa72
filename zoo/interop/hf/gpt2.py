"""GPT-2 (Radford et al. 2019) <-> zoo's `gpt` composition with `activation=gelu_tanh`:
decoder-only, learned positions, pre-LN LayerNorm, biases everywhere, tied embeddings.

GPT-2 stores its projections as `Conv1D` with (in, out) weights: they are transposed on the
way in and out. Its fused `c_attn` holds q, k, v in zoo's order."""

from __future__ import annotations

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf.common import UnsupportedConfig, composed_as, load_exact, require
from zoo.models import build_model

ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}
HF_ACTIVATIONS = {"gelu_tanh": "gelu_pytorch_tanh", "gelu": "gelu", "relu": "relu"}
# Conv1D weights of one layer: zoo name -> GPT-2 name
LAYER = {
    "self_attn.qkv_proj": "attn.c_attn",
    "self_attn.o_proj": "attn.c_proj",
    "ff.w_in": "mlp.c_fc",
    "ff.w_out": "mlp.c_proj",
}
NORMS = {"self_attn_sub.norm": "ln_1", "ff_sub.norm": "ln_2"}


class Gpt2Converter:
    description = (
        "gpt2: decoder-only, learned positions, pre-LN layernorm, " + "/".join(HF_ACTIVATIONS) + ", biases, tied"
    )

    @staticmethod
    def matches(cfg) -> bool:
        return (
            composed_as(
                cfg,
                family="decoder_only",
                position="learned",
                norm="pre",
                norm_type="layernorm",
                activation=tuple(HF_ACTIVATIONS),
            )
            and cfg.bias
            and cfg.tie_embeddings
            and cfg.n_kv_heads == cfg.n_heads
            and cfg.head_dim * cfg.n_heads == cfg.d_model
        )

    def zoo_config(self, config):
        require(config, "activation_function", tuple(ACTIVATIONS))
        require(config, "scale_attn_weights", True)
        require(config, "scale_attn_by_inverse_layer_idx", (False, None))
        require(config, "add_cross_attention", (False, None))
        require(config, "tie_word_embeddings", (True, None), "zoo's GPT-2 ties its output to the embedding")
        return ModelConfig(
            family="decoder_only",
            position={"kind": "learned"},
            norm="pre",
            norm_type="layernorm",
            norm_eps=config.layer_norm_epsilon,
            activation=ACTIVATIONS[config.activation_function],
            d_model=config.n_embd,
            n_heads=config.n_head,
            n_layers=config.n_layer,
            d_ff=config.n_inner or 4 * config.n_embd,
            vocab_size=config.vocab_size,
            max_seq_len=config.n_positions,
            dropout=0.0,
            tie_embeddings=True,
            bias=True,
        )

    @staticmethod
    def pairs(n_layers: int):
        """(zoo name, GPT-2 name, transposed) of every weight; Conv1D weights are transposed."""
        yield "embed.weight", "transformer.wte.weight", False
        yield "lm_head.weight", "transformer.wte.weight", False
        yield "decoder.positions.0.table.weight", "transformer.wpe.weight", False
        for suffix in ("weight", "bias"):
            yield f"decoder.final_norm.{suffix}", f"transformer.ln_f.{suffix}", False
        for i in range(n_layers):
            hf, z = f"transformer.h.{i}.", f"decoder.layers.{i}."
            for ours, theirs in LAYER.items():
                yield z + ours + ".weight", hf + theirs + ".weight", True
                yield z + ours + ".bias", hf + theirs + ".bias", False
            for ours, theirs in NORMS.items():
                for suffix in ("weight", "bias"):
                    yield f"{z}{ours}.{suffix}", f"{hf}{theirs}.{suffix}", False

    def from_hf(self, hf_model):
        model = build_model(self.zoo_config(hf_model.config))
        sd = hf_model.state_dict()
        out = {
            ours: sd[theirs].t() if transposed else sd[theirs]  # Conv1D (in, out) -> (out, in)
            for ours, theirs, transposed in self.pairs(model.config.n_layers)
        }
        load_exact(model, out)
        return model.eval()

    def to_hf(self, model):
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = model.config
        if cfg.activation.value not in HF_ACTIVATIONS:
            raise UnsupportedConfig(f"model.activation={cfg.activation.value} has no GPT-2 equivalent")
        hf = GPT2LMHeadModel(
            GPT2Config(
                vocab_size=cfg.vocab_size,
                n_positions=cfg.max_seq_len,
                n_embd=cfg.d_model,
                n_layer=cfg.n_layers,
                n_head=cfg.n_heads,
                n_inner=cfg.d_ff,
                activation_function=HF_ACTIVATIONS[cfg.activation.value],
                layer_norm_epsilon=cfg.norm_eps,
                resid_pdrop=0.0,
                embd_pdrop=0.0,
                attn_pdrop=0.0,
                tie_word_embeddings=True,
                bos_token_id=None,
                eos_token_id=None,
            )
        )
        sd = model.state_dict()
        out = {
            theirs: sd[ours].t().contiguous() if transposed else sd[ours]
            for ours, theirs, transposed in self.pairs(cfg.n_layers)
        }
        out["lm_head.weight"] = sd["embed.weight"]
        load_exact(hf, out)
        return hf.eval()
