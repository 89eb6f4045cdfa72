"""Mamba 2's SSD mixer (`zoo.nn.mamba2`) against itself and its row (`zoo.config.facts.mamba2`):
the chunked form equals the one-step recurrent form at several chunk sizes (the sequence not a
multiple of the chunk) and from a carried state, a packed pair of documents with a reset equals
each run alone, the torch-free parameters, FLOPs and state bytes equal the built module's, the
module starts as its row declares, and the `model.ssm_*` checks refuse on one line."""

from __future__ import annotations

import dataclasses
import types

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from zoo.config import ModelConfig
from zoo.config.errors import ConfigError
from zoo.config.facts.families import Family
from zoo.config.facts.mamba2 import (
    SSM_DEFAULTS,
    check_mamba2,
    mamba2_dims,
    mamba2_flops,
    mamba2_params,
    mamba2_sequence_flops,
    mamba2_starts,
    mamba2_state_bytes,
    mamba2_step_flops,
)
from zoo.config.facts.starts import Init, Start
from zoo.config.schema.model import model_defaults
from zoo.models.init import initial_value
from zoo.nn.mamba2 import Mamba2, segment_sum
from zoo.nn.recurrent_state import RecurrentState

D = 32
SMALL = dict(attention="mamba2", d_model=D, n_heads=4, ssm_state=8, ssm_head_dim=16, ssm_groups=2)


def _config(**overrides) -> ModelConfig:
    return ModelConfig(**{**SMALL, **overrides})


def _mixer(seed: int = 0, **overrides) -> Mamba2:
    """A mixer whose every parameter is random (decays spread over the heads, some near 1, some
    near 0), so that no term of the scan hides behind a start value."""
    torch.manual_seed(seed)
    mixer = Mamba2(_config(**overrides)).eval()
    with torch.no_grad():
        for p in mixer.parameters():
            p.normal_(0.0, 0.3)
        mixer.A_log.uniform_(-2.0, 1.5)
        mixer.dt_bias.uniform_(-2.0, 1.0)
    return mixer


def _steps(mixer: Mamba2, x: torch.Tensor, state=None, reset=None) -> torch.Tensor:
    """x (B, T, D) one position at a time through the recurrent form."""
    state = mixer.empty_state(x.shape[0]) if state is None else state
    out = [
        mixer(x[:, t : t + 1], state, reset=None if reset is None else reset[:, t : t + 1]) for t in range(x.shape[1])
    ]
    return torch.cat(out, dim=1)


@pytest.mark.parametrize("chunk", [1, 3, 4, 16])
def test_the_chunked_form_equals_the_recurrent_one(chunk):
    """T = 10: chunks of 1, 3 (a last one of 1), 4 (a last one of 2) and 16 (one short chunk);
    the outputs and the final states agree."""
    mixer = _mixer(ssm_chunk=chunk)
    x = torch.randn(2, 10, D)
    with torch.no_grad():
        chunked_state, step_state = mixer.empty_state(2), mixer.empty_state(2)
        chunked = mixer(x, chunked_state)
        stepped = _steps(mixer, x, step_state)
        assert torch.allclose(mixer(x), chunked)  # with or without a state to leave
    assert chunked.abs().max() > 0.1
    torch.testing.assert_close(chunked, stepped, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(chunked_state.ssm, step_state.ssm, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(chunked_state.conv, step_state.conv)


def test_a_prefill_continues_from_the_state_it_left():
    """6 positions, then 5 from the state they left (chunks of 4), then 2 steps: the whole
    sequence's output."""
    mixer = _mixer(ssm_chunk=4)
    x = torch.randn(2, 13, D)
    with torch.no_grad():
        whole = mixer(x)
        state = mixer.empty_state(2)
        parts = [mixer(x[:, :6], state), mixer(x[:, 6:11], state), _steps(mixer, x[:, 11:], state)]
    torch.testing.assert_close(torch.cat(parts, dim=1), whole, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("chunk", [2, 4, 32])
def test_a_reset_makes_a_packed_pair_of_documents_each_run_alone(chunk):
    """Documents of 5 and 7 positions packed in one row, reset at position 5 (inside a chunk of
    2 and 4, within the one chunk of 32): each document's output is its own run's, chunked and
    step by step; the state left is the second document's alone."""
    mixer = _mixer(ssm_chunk=chunk)
    first, second = torch.randn(1, 5, D), torch.randn(1, 7, D)
    packed = torch.cat([first, second], dim=1)
    reset = torch.zeros(1, 12, dtype=torch.bool)
    reset[0, 5] = True
    with torch.no_grad():
        alone_state = mixer.empty_state(1)
        alone = torch.cat([mixer(first), mixer(second, alone_state)], dim=1)
        packed_state = mixer.empty_state(1)
        together = mixer(packed, packed_state, reset=reset)
        stepped = _steps(mixer, packed, reset=reset)
        without = mixer(packed)
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(stepped, alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(packed_state.ssm, alone_state.ssm, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(packed_state.conv, alone_state.conv)
    assert (without[:, 5:] - alone[:, 5:]).abs().max() > 1e-3  # without the reset the first leaks in


def test_a_reset_at_the_first_position_drops_the_carried_state():
    """A state carried in, then a row whose first position starts a document and a row that
    continues: the first row equals a fresh run, the second the continued one."""
    mixer = _mixer(ssm_chunk=3)
    prefix, x = torch.randn(2, 4, D), torch.randn(2, 5, D)
    reset = torch.tensor([[True, False, False, False, False], [False] * 5])
    with torch.no_grad():
        state = mixer.empty_state(2)
        mixer(prefix, state)
        out = mixer(x, state, reset=reset)
        fresh = mixer(x[:1])
        carried = mixer.empty_state(1)
        mixer(prefix[1:], carried)
        continued = mixer(x[1:], carried)
    torch.testing.assert_close(out[:1], fresh, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[1:], continued, atol=1e-5, rtol=1e-5)


def test_reorder_keeps_the_rows_it_picks_in_place():
    """The stack's static state (`RecurrentState` with a capacity) keeps its tensors' storage."""
    mixer = _mixer()
    with torch.no_grad():
        state = RecurrentState(capacity=8)
        mixer(torch.randn(3, 4, D), state)
    conv, ssm = state.conv.clone(), state.ssm.clone()
    conv_storage = state.conv.data_ptr()
    index = torch.tensor([2, 2, 0])
    state.reorder(index)
    assert state.conv.data_ptr() == conv_storage
    assert torch.equal(state.conv, conv[index]) and torch.equal(state.ssm, ssm[index])


def test_the_backward_pass_reaches_every_parameter():
    mixer = _mixer(ssm_chunk=4)
    mixer.train()
    reset = torch.zeros(2, 9, dtype=torch.bool)
    reset[1, 3] = True
    mixer(torch.randn(2, 9, D), reset=reset).square().mean().backward()
    for name, p in mixer.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


def test_segment_sum_sums_between_positions():
    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    s = segment_sum(a)
    assert s[3, 1].item() == 7.0 and s[2, 2].item() == 0.0 and s[1, 0].item() == 2.0
    assert torch.isinf(s[0, 1]) and s[0, 1] < 0


SIZES = [
    dict(),
    dict(bias=False),
    dict(ssm_groups=1, ssm_state=4, conv_kernel=2),
    dict(ssm_heads=8, ssm_head_dim=8, ssm_groups=4, ssm_expand=2),
    dict(d_model=24, n_heads=2, ssm_expand=3, ssm_head_dim=12, ssm_groups=3, conv_kernel=3),
]


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "small")
def test_the_row_counts_the_built_modules_parameters_and_state(sizes):
    cfg = _config(**sizes)
    mixer = Mamba2(cfg)
    assert mamba2_params(cfg) == sum(p.numel() for p in mixer.parameters())
    for dtype in (torch.float32, torch.bfloat16):
        state = mixer.empty_state(1, dtype=dtype)
        held = sum(t.numel() * t.element_size() for t in (state.conv, state.ssm))
        assert mamba2_state_bytes(cfg, torch.tensor([], dtype=dtype).element_size()) == held
    d = mamba2_dims(cfg)
    assert tuple(state.conv.shape) == (1, d.conv_dim, d.conv_kernel - 1)
    assert tuple(state.ssm.shape) == (1, d.heads, d.head_dim, d.state)


def test_the_state_is_flat_in_the_context_length():
    mixer = _mixer()
    with torch.no_grad():
        short, long = mixer.empty_state(1), mixer.empty_state(1)
        mixer(torch.randn(1, 3, D), short)
        mixer(torch.randn(1, 40, D), long)
    assert short.conv.shape == long.conv.shape and short.ssm.shape == long.ssm.shape


def _flops(fn) -> int:
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize(("chunk", "T"), [(4, 4), (4, 12), (4, 10), (3, 10), (16, 7), (1, 5)])
@pytest.mark.parametrize("sizes", SIZES[:4], ids=["small", "no-bias", "one-group", "heads-given"])
def test_the_row_counts_the_forwards_matrix_multiplies(sizes, chunk, T):
    """torch's FlopCounterMode over the chunked forward of 2 sequences of T is twice the row's
    count of one; per token it is exact where T <= Q or T is a multiple of Q; one step is
    `mamba2_step_flops`."""
    cfg = _config(**sizes, ssm_chunk=chunk)
    mixer = Mamba2(cfg)
    x = torch.randn(2, T, cfg.d_model)
    assert _flops(lambda: mixer(x)) == 2 * mamba2_sequence_flops(cfg, T)
    if T <= chunk or T % chunk == 0:
        assert T * mamba2_flops(cfg, T) == mamba2_sequence_flops(cfg, T)
    state = mixer.empty_state(2)
    assert _flops(lambda: mixer(x[:, :1], state)) == 2 * mamba2_step_flops(cfg)


def test_the_flops_per_token_grow_with_the_chunk_not_the_context():
    """Past one chunk the within-chunk products stop growing: the per-token count at 4·Q is the
    count at Q."""
    cfg = _config(ssm_chunk=8)
    assert mamba2_flops(cfg, 8) == mamba2_flops(cfg, 32) == mamba2_flops(cfg, 64)
    assert mamba2_flops(cfg, 4) < mamba2_flops(cfg, 8)


def test_the_module_starts_as_its_row_declares():
    """reset_parameters draws what the model's initialisation would: A_log = log(1..H), dt_bias
    and D at 1, the conv bias at 0, the norm's gain at 1, the conv weights at the row's std;
    and every parameter is a linear layer's or declared in its module's starts."""
    cfg = _config(ssm_heads=8, ssm_head_dim=8)
    mixer = Mamba2(cfg)
    starts = mamba2_starts(cfg)
    modules = dict(mixer.named_modules())
    for name, p in mixer.named_parameters():
        owner, _, leaf = name.rpartition(".")
        module = modules[owner]
        if isinstance(module, torch.nn.Linear):
            continue
        assert module.starts == starts[owner] and leaf in module.starts, name
        rule = module.starts[leaf].resolved(cfg.init_std)
        if rule.start == Start.normal:
            assert rule.std is not None and abs(p.detach().std().item() - rule.std) < 0.35 * rule.std
        else:
            assert torch.equal(p.detach(), initial_value(rule, p.shape, 0, name)), name
    assert torch.allclose(-torch.exp(mixer.A_log), -torch.arange(1.0, 9.0))


def test_log_arange_starts_each_row_at_log_1_to_n():
    value = initial_value(Init(Start.log_arange), torch.Size([2, 3]), 0, "A_log")
    assert torch.allclose(value, torch.log(torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])))
    with pytest.raises(ValueError, match="takes no std"):
        Init(Start.log_arange, 0.1)


def test_the_ssm_defaults_are_the_schemas_and_leave_every_config_as_it_was():
    """The row's defaults are the schema's; a config without Mamba 2 layers does not check their
    widths (a D of 24 is not a multiple of ssm_head_dim) and refuses a model.ssm_* key set."""
    defaults = model_defaults()
    assert {name: defaults[name] for name in SSM_DEFAULTS} == SSM_DEFAULTS
    ModelConfig(d_model=24, n_heads=2)
    with pytest.raises(ConfigError, match="model.ssm_chunk=8 only applies to Mamba 2 layers"):
        ModelConfig(d_model=32, n_heads=2, ssm_chunk=8)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(ssm_state=0), "model.ssm_state must be a positive integer, got 0"),
        (dict(ssm_groups=True), "model.ssm_groups must be a positive integer, got True"),
        (dict(ssm_heads=-2), "model.ssm_heads must be a positive integer, got -2"),
        (dict(ssm_head_dim=24), "= 64 must be divisible by model.ssm_head_dim=24"),
        (dict(ssm_heads=3), "3 x 16 = 48 != 64"),
        (dict(ssm_groups=3), "model.ssm_heads=4 must be divisible by model.ssm_groups=3"),
    ],
)
def test_bad_widths_are_refused_on_one_line(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        _config(**overrides)
    assert "\n" not in str(caught.value)


def test_mamba2_layers_are_refused_in_a_bidirectional_stack():
    """Where a layer is Mamba 2, an encoder is refused on one line (its scan runs forward only,
    as every recurrent kind's); the widths are checked where the mixer is used."""
    with pytest.raises(ConfigError, match=r"model.attention=mamba2 has a recurrent layer \(mamba2\)") as caught:
        _config(family=Family.encoder_only)
    assert "\n" not in str(caught.value)
    built = _config()
    as_mixer = {f.name: getattr(built, f.name) for f in dataclasses.fields(built)}
    check_mamba2(types.SimpleNamespace(**as_mixer), used=True)
    with pytest.raises(ConfigError, match="must be divisible by model.ssm_head_dim=24"):
        check_mamba2(types.SimpleNamespace(**{**as_mixer, "ssm_head_dim": 24}), used=True)


def test_document_ids_reset_the_state_at_each_documents_first_token():
    """The stack passes document ids (B, T): the mixer resets where the id changes, as `reset`
    marks it; a packed row equals each document run alone."""
    mixer = _mixer(ssm_chunk=4)
    first, second = torch.randn(1, 5, D), torch.randn(1, 7, D)
    ids = torch.tensor([[0] * 5 + [1] * 7])
    with torch.no_grad():
        packed = mixer(torch.cat([first, second], dim=1), document_ids=ids)
        alone = torch.cat([mixer(first), mixer(second)], dim=1)
    torch.testing.assert_close(packed, alone, atol=1e-5, rtol=1e-5)


def test_left_padding_writes_nothing_into_the_state():
    """A row left-padded by 3 (`padding` False there) leaves the state and the outputs after the
    padding that the unpadded row gives, chunked and then one step on."""
    mixer = _mixer(ssm_chunk=4)
    x = torch.randn(1, 6, D)
    padded = torch.cat([torch.randn(1, 3, D), x], dim=1)
    padding = torch.tensor([[False] * 3 + [True] * 6])
    step = torch.randn(1, 1, D)
    with torch.no_grad():
        ours, theirs = mixer.empty_state(1), mixer.empty_state(1)
        got = mixer(padded, ours, padding=padding)[:, 3:]
        expected = mixer(x, theirs)
        got_step = mixer(step, ours, padding=torch.cat([padding, torch.ones(1, 1, dtype=torch.bool)], dim=1))
        expected_step = mixer(step, theirs)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.ssm, theirs.ssm, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_step, expected_step, atol=1e-5, rtol=1e-5)
