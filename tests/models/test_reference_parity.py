"""The `transformer` family against torch.nn.Transformer (code nobody here wrote), given the
same weights and the same embedded inputs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import zoo
from tests.conftest import tiny

D, H, FF, LAYERS = 16, 4, 40, 2


def copy_self_attention(ours, theirs: nn.MultiheadAttention) -> None:
    ours.qkv_proj.weight.copy_(theirs.in_proj_weight)  # rows: q, k, v — same layout
    ours.qkv_proj.bias.copy_(theirs.in_proj_bias)
    ours.o_proj.weight.copy_(theirs.out_proj.weight)
    ours.o_proj.bias.copy_(theirs.out_proj.bias)


def copy_cross_attention(ours, theirs: nn.MultiheadAttention) -> None:
    ours.q_proj.weight.copy_(theirs.in_proj_weight[:D])
    ours.q_proj.bias.copy_(theirs.in_proj_bias[:D])
    ours.kv_proj.weight.copy_(theirs.in_proj_weight[D:])
    ours.kv_proj.bias.copy_(theirs.in_proj_bias[D:])
    ours.o_proj.weight.copy_(theirs.out_proj.weight)
    ours.o_proj.bias.copy_(theirs.out_proj.bias)


def copy_ff_and_norms(block, layer, norms) -> None:
    block.ff.w_in.load_state_dict(layer.linear1.state_dict())
    block.ff.w_out.load_state_dict(layer.linear2.state_dict())
    for sub, norm in zip(norms, (layer.norm1, layer.norm2, getattr(layer, "norm3", None))):
        sub.norm.load_state_dict(norm.state_dict())


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_transformer_family_matches_torch_nn_transformer(norm):
    ref = nn.Transformer(
        d_model=D,
        nhead=H,
        num_encoder_layers=LAYERS,
        num_decoder_layers=LAYERS,
        dim_feedforward=FF,
        dropout=0.0,
        batch_first=True,
        norm_first=norm == "pre",
    )
    ours = zoo.build_model(
        tiny(
            "encoder_decoder",
            "none",
            d_model=D,
            n_heads=H,
            n_layers=LAYERS,
            n_decoder_layers=LAYERS,
            d_ff=FF,
            norm=norm,
            activation="relu",
        )
    )
    ref.eval(), ours.eval()
    with torch.no_grad():
        # randomise LayerNorm affine parameters so the copy is really checked
        for module in ref.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.5, 0.5)
        for block, layer in zip(ours.encoder.layers, ref.encoder.layers):
            copy_self_attention(block.self_attn, layer.self_attn)
            copy_ff_and_norms(block, layer, (block.self_attn_sub, block.ff_sub))
        for block, layer in zip(ours.decoder.layers, ref.decoder.layers):
            copy_self_attention(block.self_attn, layer.self_attn)
            copy_cross_attention(block.cross_attn, layer.multihead_attn)
            copy_ff_and_norms(block, layer, (block.self_attn_sub, block.cross_attn_sub, block.ff_sub))
        if norm == "pre":
            ours.encoder.final_norm.load_state_dict(ref.encoder.norm.state_dict())
            ours.decoder.final_norm.load_state_dict(ref.decoder.norm.state_dict())
        else:
            # nn.Transformer always appends a final LayerNorm; post-LN (Vaswani et al.) has none
            ref.encoder.norm = None
            ref.decoder.norm = None

    src, tgt = torch.randn(3, 7, D), torch.randn(3, 5, D)
    src_pad = torch.tensor([[False] * 7, [False] * 5 + [True] * 2, [False] * 6 + [True]])
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    expected = ref(src, tgt, tgt_mask=causal, src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad)

    keep = (~src_pad).long()
    memory = ours.encoder(src, positions=torch.arange(7)[None], key_padding=keep)
    got = ours.decoder(tgt, positions=torch.arange(5)[None], memory=memory, memory_padding=keep)
    assert torch.allclose(got, expected, atol=1e-5), (got - expected).abs().max()
    ref_memory = ref.encoder(src, src_key_padding_mask=src_pad)
    real = keep.bool()
    assert torch.allclose(memory[real], ref_memory[real], atol=1e-5)
