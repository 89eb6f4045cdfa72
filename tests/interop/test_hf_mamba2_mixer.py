"""Mamba 2's mixer against transformers' `BambaMixer` and `Mamba2Mixer` (their reference PyTorch
paths: mamba-ssm and causal-conv1d are not installed): a small random layer (D 32, E 64 in 4
heads of 16, 2 groups, a state of 8, a kernel of 4, chunks of 4 or 3 over 5 to 9 positions), its
state dict loaded into `zoo.nn.mamba2.Mamba2` as it is (the same names and shapes): the same
output without a cache, and after a prefill through transformers' `DynamicCache` and zoo's
`RecurrentState`, the same output at each of 3 one-token steps (float32, <= 1e-4)."""

from __future__ import annotations

import pytest
import torch
import transformers  # a test dependency: missing, these tests fail rather than skip
from transformers.models.bamba.modeling_bamba import BambaMixer
from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer

from zoo.config import ModelConfig
from zoo.nn.mamba2 import Mamba2

D, H, P, N, G = 32, 4, 16, 8, 2


def _bamba(chunk: int, bias: bool) -> tuple[torch.nn.Module, transformers.PreTrainedConfig]:
    config = transformers.BambaConfig(
        hidden_size=D,
        num_hidden_layers=1,
        attn_layer_indices=[],
        mamba_n_heads=H,
        mamba_d_head=P,
        mamba_d_state=N,
        mamba_n_groups=G,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_chunk_size=chunk,
        mamba_proj_bias=bias,
        mamba_conv_bias=True,
        rms_norm_eps=1e-5,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=64,
        vocab_size=50,
    )
    return BambaMixer(config, 0), config


def _mamba2(chunk: int, bias: bool) -> tuple[torch.nn.Module, transformers.PreTrainedConfig]:
    config = transformers.Mamba2Config(
        hidden_size=D,
        num_heads=H,
        head_dim=P,
        state_size=N,
        n_groups=G,
        conv_kernel=4,
        expand=2,
        chunk_size=chunk,
        use_bias=bias,
        use_conv_bias=True,
        layer_norm_epsilon=1e-5,
        num_hidden_layers=1,
        vocab_size=50,
    )
    return Mamba2Mixer(config, 0), config


REFERENCES = {"bamba": _bamba, "mamba2": _mamba2}


def _pair(reference: str, chunk: int, bias: bool) -> tuple[torch.nn.Module, Mamba2, transformers.PreTrainedConfig]:
    """transformers' mixer with every weight random (decays spread over the heads) and zoo's
    with the same state dict."""
    torch.manual_seed(0)
    theirs, config = REFERENCES[reference](chunk, bias)
    theirs.eval()
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_(0.0, 0.3)
        theirs.A_log.uniform_(-1.0, 1.5)
    cfg = ModelConfig(
        attention="mamba2",
        d_model=D,
        n_heads=4,
        bias=bias,
        norm_eps=1e-5,
        ssm_state=N,
        ssm_head_dim=P,
        ssm_groups=G,
        ssm_expand=2,
        conv_kernel=4,
        ssm_chunk=chunk,
    )
    ours = Mamba2(cfg).eval()
    ours.load_state_dict(theirs.state_dict(), strict=True)  # the same names and shapes
    return theirs, ours, config


@pytest.mark.parametrize("reference", sorted(REFERENCES))
@pytest.mark.parametrize(("chunk", "T", "bias"), [(4, 7, False), (3, 9, True), (16, 5, False)])
def test_zoos_mamba2_is_transformers_mixer_without_a_cache(reference, chunk, T, bias):
    theirs, ours, _ = _pair(reference, chunk, bias)
    x = torch.randn(2, T, D)
    with torch.no_grad():
        expected, got = theirs(x), ours(x)
    assert expected.abs().max() > 0.1
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("reference", sorted(REFERENCES))
@pytest.mark.parametrize(("chunk", "prefill"), [(4, 6), (3, 3)])
def test_zoos_state_decodes_as_transformers_cache(reference, chunk, prefill):
    """A prefill of `prefill` positions, then 3 one-token steps: each output equals
    transformers' through its DynamicCache, and the SSM state left equals the cache's recurrent
    state."""
    theirs, ours, config = _pair(reference, chunk, bias=False)
    x = torch.randn(2, prefill + 3, D)
    cache = transformers.DynamicCache(config=config)
    state = ours.empty_state(2)
    with torch.no_grad():
        torch.testing.assert_close(
            ours(x[:, :prefill], state), theirs(x[:, :prefill], cache=cache), atol=1e-4, rtol=1e-4
        )
        for t in range(prefill, prefill + 3):
            expected = theirs(x[:, t : t + 1], cache=cache)
            torch.testing.assert_close(ours(x[:, t : t + 1], state), expected, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(state.ssm, cache.get_recurrent_state(0), atol=1e-4, rtol=1e-4)
    # transformers' conv state keeps K inputs, zoo's the last K - 1 (all a step needs)
    torch.testing.assert_close(state.conv, cache.get_conv_state(0)[..., 1:])
