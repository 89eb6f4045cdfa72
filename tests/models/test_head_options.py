"""General options that pretrained families need and any composition can use: token-type
embeddings, the attention scale, the output head's transform, D^-0.5 scaling and bias, and an
offset into the learned position table."""

from __future__ import annotations

import pytest
import torch

import zoo
from tests.conftest import FAMILIES, tiny


def run(model, ids, **kw):
    if model.config.family.value == "encoder_decoder":
        return model(ids, decoder_input_ids=ids, **kw)
    return model(ids, **kw)


def twins(family, **kw):
    """(a default model with learned positions, a model with `kw`) starting from the same seed."""
    torch.manual_seed(0)
    a = zoo.build_model(tiny(family, "learned")).eval()
    torch.manual_seed(0)
    cfg = tiny(family, "learned")
    cfg.update(kw)
    b = zoo.build_model(cfg).eval()
    return a, b


def assert_token_types_add_a_segment_embedding(family):
    model = zoo.build_model(tiny(family, "learned", token_types=2)).eval()
    ids = torch.randint(0, 37, (2, 6))
    zeros, ones = torch.zeros_like(ids), torch.ones_like(ids)
    with torch.no_grad():
        default = run(model, ids).hidden_states
        assert torch.equal(default, run(model, ids, token_type_ids=zeros).hidden_states)
        assert not torch.allclose(default, run(model, ids, token_type_ids=ones).hidden_states)
    for bad in (ones * 2, ones - 2, torch.cat([zeros[:, :1] - 1, ones[:, 1:]], dim=1)):  # too high, negative, mixed
        with pytest.raises(ValueError, match=r"token_type_ids must be in \[0, 2\)"):
            run(model, ids, token_type_ids=bad)
    plain = zoo.build_model(tiny(family, "learned"))
    with pytest.raises(ValueError, match="model.token_types=0"):
        run(plain, ids, token_type_ids=zeros)


def assert_an_explicit_default_attention_scale_changes_nothing_and_1_does(family):
    a, b = twins(family, attention_scale=8**-0.5)  # Dh = 16 / 2 heads
    _, c = twins(family, attention_scale=1.0)
    ids = torch.randint(0, 37, (2, 7))
    with torch.no_grad():
        assert torch.allclose(run(a, ids).logits, run(b, ids).logits, atol=1e-6)
        assert (run(a, ids).logits - run(c, ids).logits).abs().max() > 1e-4


def assert_scale_output_multiplies_the_head_input_by_d_to_the_minus_half(family):
    a, b = twins(family, scale_output=True)
    ids = torch.randint(0, 37, (2, 7))
    with torch.no_grad():
        assert torch.allclose(run(b, ids).logits, run(a, ids).logits * 16**-0.5, atol=1e-6)


def assert_output_bias_and_head_transform(family):
    a, b = twins(family, output_bias=True, head_transform=True)
    extra = sum(p.numel() for p in b.parameters()) - sum(p.numel() for p in a.parameters())
    assert extra == 37 + (16 * 16 + 16) + 2 * 16  # bias (V) + dense (D·D + D) + LayerNorm (2·D)
    ids = torch.randint(0, 37, (2, 7))
    with torch.no_grad():
        b.output_bias.fill_(0.5)
        h = run(b, ids).hidden_states
        expected = b.lm_head(b.head_transform(h)) + 0.5
        assert torch.allclose(run(b, ids).logits, expected, atol=1e-6)
    b.drop_output_head()
    assert b.lm_head is None and b.head_transform is None and b.output_bias is None
    # the tied projection is the embedding, which stays
    assert sum(p.numel() for p in b.parameters()) == sum(p.numel() for p in a.parameters())


def assert_position_offset_reads_rows_after_the_offset(family):
    a, b = twins(family, position={"kind": "learned", "offset": 2})
    stack = "decoder" if family != "encoder_only" else "encoder"
    table_a = getattr(a, stack).positions[0].table
    table_b = getattr(b, stack).positions[0].table
    assert table_b.weight.shape == (table_a.weight.shape[0] + 2, 16)
    b.load_state_dict({k: v for k, v in a.state_dict().items() if "positions" not in k}, strict=False)
    with torch.no_grad():
        for name in ("encoder", "decoder"):
            if hasattr(a, name):
                getattr(b, name).positions[0].table.weight[2:] = getattr(a, name).positions[0].table.weight
                getattr(b, name).positions[0].table.weight[:2] = 99.0  # never read
        ids = torch.randint(0, 37, (2, 7))
        assert torch.allclose(run(a, ids).logits, run(b, ids).logits, atol=1e-6)


@pytest.mark.parametrize(
    "key, value",
    [
        ("token_types", -1),
        ("attention_scale", 0.0),
        ("position", {"kind": "rope", "offset": 2}),
        ("position", {"kind": "learned", "offset": -1}),
    ],
)
def test_bad_values_are_refused(key, value):
    from zoo.config.errors import ConfigError
    from zoo.config.schema.model import ModelConfig

    with pytest.raises(ConfigError, match="token_types|attention_scale|offset"):
        ModelConfig(**{**tiny("decoder_only", "learned"), key: value})


def assert_token_loss_ignores_rows_without_a_target(family, output_loss):
    """Rows whose target is -100 weigh nothing: the loss is the mean cross-entropy of the others
    (F.cross_entropy's ignore_index), with and without label smoothing."""
    from zoo.config.schema.task import OutputLoss

    torch.manual_seed(0)
    model = zoo.build_model(tiny(family, "learned")).eval()
    hidden = torch.randn(6, 16)
    targets = torch.tensor([3, -100, 5, -100, -100, 36])
    logits = model.logits(hidden[None])[0]  # (N, V)
    for smoothing in (0.0, 0.1):
        expected = torch.nn.functional.cross_entropy(logits, targets, ignore_index=-100, label_smoothing=smoothing)
        kept = torch.nn.functional.cross_entropy(
            logits[targets != -100], targets[targets != -100], label_smoothing=smoothing
        )
        with torch.no_grad():
            got = model.token_loss(hidden, targets, output_loss=OutputLoss(output_loss), label_smoothing=smoothing)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(got, kept)


def assert_forward_loss_is_the_cross_entropy_of_the_forward_logits(family):
    torch.manual_seed(0)
    model = zoo.build_model(tiny(family, "learned")).eval()
    ids = torch.randint(0, 37, (2, 6))
    targets = torch.randint(0, 37, (2, 6))
    targets[0, :2] = -100
    inputs = {"input_ids": ids, **({"decoder_input_ids": ids} if family == "encoder_decoder" else {})}
    with torch.no_grad():
        logits = model(**inputs).logits  # (B, T, V)
        expected = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        torch.testing.assert_close(model.forward_loss(inputs, targets), expected)


def assert_unit_embeddings_start_at_the_size_of_a_sinusoid(family):
    """Vaswani et al. §3.4 with fairseq's initialisation (model.embed_init=unit): embeddings
    drawn at std D^-0.5 and multiplied by sqrt(D) start at unit RMS, the sinusoid's order (its RMS
    is 1/sqrt(2)). The default draws them at init_std, like every other table: scaled by sqrt(D),
    several times smaller than the positions they are added to."""
    d = 256
    torch.manual_seed(0)
    unit = zoo.build_model(tiny(family, "sinusoidal", d_model=d, n_heads=4, scale_embeddings=True, embed_init="unit"))
    rms = (unit.embed.weight * unit.embed.multiplier).pow(2).mean().sqrt().item()
    assert 0.95 < rms < 1.05, rms
    assert unit.config.embedding_std == pytest.approx(d**-0.5)
    default = zoo.build_model(tiny(family, "sinusoidal", d_model=d, n_heads=4, scale_embeddings=True))
    assert default.embed.weight.std().item() == pytest.approx(default.config.init_std, rel=0.05)
    matrices = [
        m.weight for m in unit.modules() if isinstance(m, torch.nn.Linear) and m.weight is not unit.embed.weight
    ]
    assert all(w.std().item() == pytest.approx(unit.config.init_std, rel=0.25) for w in matrices if w.numel() > 1000)


def checks(family: str) -> dict:
    """{subtest name: the check} of the head and embedding options on `family`."""
    out = {}
    if family != "encoder_decoder":  # token types: the families BERT and GPT-2 come from
        out["token types add a segment embedding"] = lambda: assert_token_types_add_a_segment_embedding(family)
    for name, check in (
        (
            "an explicit default attention scale changes nothing and 1 does",
            assert_an_explicit_default_attention_scale_changes_nothing_and_1_does,
        ),
        (
            "scale_output multiplies the head input by D^-0.5",
            assert_scale_output_multiplies_the_head_input_by_d_to_the_minus_half,
        ),
        ("output bias and head transform", assert_output_bias_and_head_transform),
        ("the position offset reads rows after the offset", assert_position_offset_reads_rows_after_the_offset),
        (
            "the forward loss is the cross-entropy of the forward logits",
            assert_forward_loss_is_the_cross_entropy_of_the_forward_logits,
        ),
        ("unit embeddings start at the size of a sinusoid", assert_unit_embeddings_start_at_the_size_of_a_sinusoid),
    ):
        out[name] = lambda check=check: check(family)
    for loss in ("chunked", "logits"):
        out[f"the token loss ignores rows without a target ({loss})"] = lambda loss=loss: (
            assert_token_loss_ignores_rows_without_a_target(family, loss)
        )
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_a_familys_head_and_embedding_options(subtests, family):
    """Each option on one family, a subtest each (`checks`): token types (where a family takes
    them), the attention scale, D^-0.5 output scaling, output bias and head transform, the
    position offset, the token loss's ignored rows (chunked and whole logits), the forward loss,
    unit embeddings. Each check asserts; a failing one fails its subtest and this test."""
    named = checks(family)
    assert len(named) == (8 if family == "encoder_decoder" else 9)
    for name, check in named.items():
        with subtests.test(name):
            check()


def test_an_unknown_embedding_init_is_refused():
    from zoo.config.errors import ConfigError

    with pytest.raises(ConfigError, match="model.embed_init"):
        zoo.build_model(tiny("decoder_only", "sinusoidal", embed_init="xavier"))
