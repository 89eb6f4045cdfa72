"""model.parametrization=mup (Maximal Update Parametrization; Yang et al. 2022, "Tensor Programs
V"): its per-parameter rules equal the `mup` package's, the coordinates of every layer stay put
as the width grows (the paper's coordinate check) where standard's blow up, at the base width
it is the standard model exactly, and its options are checked."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import zoo
from tests.conftest import FAMILIES
from zoo.config.errors import ConfigError
from zoo.config.schema.model import MUP_BASE_D_MODEL, ModelConfig
from zoo.config.schema.train import OptimConfig
from zoo.models.parametrization import optimizer_scales
from zoo.tasks.optim import build_optimizer, parameter_groups

BASE = 64
V, T = 37, 8


@pytest.fixture
def one_thread():
    """Small matmuls: one thread is as fast, and much faster where other processes share the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def config(family: str, width: int, parametrization: str = "mup", **kw) -> ModelConfig:
    """A one-layer model of width `width` (4 heads: Dh = width / 4); under mup with base 64."""
    if parametrization == "mup":
        kw.setdefault("mup_base_d_model", BASE)
    if family == "encoder_decoder":
        kw.setdefault("n_decoder_layers", kw.get("n_layers", 1))
    kw.setdefault("n_layers", 1)
    kw.setdefault("vocab_size", V)
    return ModelConfig(family=family, d_model=width, n_heads=4, max_seq_len=16, parametrization=parametrization, **kw)


def build(cfg: ModelConfig, seed: int = 0):
    torch.manual_seed(seed)
    return zoo.build_model(cfg)


def run(model, ids):
    if model.config.family.value == "encoder_decoder":
        return model(ids, decoder_input_ids=ids)
    return model(ids)


def adamw(model, cfg: ModelConfig, lr: float = 1e-2) -> torch.optim.Optimizer:
    return build_optimizer(
        model, OptimConfig(kind="adamw", lr=lr, weight_decay=0.1), scales=optimizer_scales(model, cfg)
    )


def train(model, optimizer, ids, steps: int) -> torch.Tensor:
    """`steps` AdamW steps of next-token loss on `ids`; the logits after them."""
    for _ in range(steps):
        logits = run(model, ids).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        return run(model, ids).logits


def per_parameter(model, optimizer, rate: str = "lr") -> dict[str, tuple[float, float]]:
    """{parameter name: (learning rate, weight decay)} of `optimizer`'s groups (`rate`:
    "initial_lr" for the rate a schedule multiplies)."""
    group_of = {id(p): g for g in optimizer.param_groups for p in g["params"]}
    return {name: (group_of[id(p)][rate], group_of[id(p)]["weight_decay"]) for name, p in model.named_parameters()}


# -- 1. the mup package's rules -----------------------------------------------------------------


def mup_reference(family: str, width: int, tie: bool):
    """zoo's *standard* model made μP the mup package's way: the output projection a MuReadout
    (MuSharedReadout when tied) whose forward divides by the width multiplier, base shapes from
    the base-width model (`set_base_shapes`), and the attention scale sqrt(base Dh)/Dh written by
    hand (mup leaves attention to the model). Same seed as `build`, so its weights are zoo's
    standard draw."""
    mup = pytest.importorskip(
        "mup",
        reason="the reference rules: pip install --no-deps mup (its torchvision and seaborn serve only its plots)",
    )

    def make(w: int):
        cfg = config(family, w, "standard", tie_embeddings=tie, attention_scale=math.sqrt(BASE // 4) / (w // 4))
        model = build(cfg)
        if tie:
            readout = mup.MuSharedReadout(model.embed.weight, bias=False)
        else:
            readout = mup.MuReadout(w, V, bias=False)
            readout.weight = model.lm_head.weight
        model.lm_head = readout
        model.logits = readout.forward  # x / width_mult, then the projection
        return model

    model = make(width)
    mup.set_base_shapes(model, make(BASE), rescale_params=False)  # zoo draws at a constant std already
    return mup, model


@pytest.mark.parametrize("family", FAMILIES)
def test_a_familys_mup_is_the_mup_packages_and_the_standard_model_at_its_base_width(subtests, family, one_thread):
    """On one family, a subtest each: the init, learning rates and output multipliers are the
    `mup` package's (tied and untied, at two widths); at its base width μP is the standard model
    (with the default head and with every head option)."""
    for tie in (True, False):
        for width in (64, 256):
            with subtests.test(f"the mup package's multipliers (tie={tie}, width={width})"):
                assert_the_mup_packages_multipliers(family, tie, width)
    for name, options in BASE_WIDTH_OPTIONS.items():
        with subtests.test(f"the standard model at the base width ({name})"):
            assert_standard_at_the_base_width(family, options)


def assert_the_mup_packages_multipliers(family, tie, width):
    mup, ref = mup_reference(family, width, tie)
    cfg = config(family, width, tie_embeddings=tie)
    ours = build(cfg)
    standard = {name: p.detach().clone() for name, p in ref.named_parameters()}  # zoo's standard draw
    assert [name for name, _ in ours.named_parameters()] == list(standard)

    # init: mup.init.normal_ (what mup prescribes for a std tuned at the base width) against torch's
    n_scaled = 0
    for name, p in ref.named_parameters():
        torch.manual_seed(1)
        plain = torch.nn.init.normal_(torch.empty(p.shape))
        drawn = torch.empty(p.shape)
        drawn.infshape = p.infshape
        torch.manual_seed(1)
        mup.init.normal_(drawn, std=1.0)
        multiplier = float((drawn / plain).flatten()[0])
        assert torch.allclose(ours.state_dict()[name], standard[name] * multiplier, rtol=1e-5, atol=1e-9), name
        n_scaled += multiplier != 1.0
    assert n_scaled == (
        0
        if width == BASE
        else sum(
            1
            for n, p in standard.items()
            if p.dim() == 2 and "embed" not in n and "lm_head" not in n and "table" not in n
        )
    )

    # learning rates and weight decays: MuAdamW over zoo's standard groups against zoo's optimizer
    oc = OptimConfig(kind="adamw", lr=1e-2, weight_decay=0.1)
    theirs = mup.MuAdamW(parameter_groups(ref, oc.weight_decay), lr=oc.lr, betas=tuple(oc.betas), eps=oc.eps)
    expected = per_parameter(ref, theirs)
    got = per_parameter(ours, adamw(ours, cfg))
    assert got.keys() == expected.keys()
    for name in got:
        assert got[name] == pytest.approx(expected[name], rel=1e-12), name
    hidden = got["decoder.layers.0.ff.w_in.weight" if family != "encoder_only" else "encoder.layers.0.ff.w_in.weight"]
    assert hidden == pytest.approx((1e-2 * BASE / width, 0.1 * width / BASE))

    # the output multiplier: MuReadout's 1/width_mult on the projection's input
    h = torch.randn(3, width)
    with torch.no_grad():
        assert torch.allclose(ours.logits(h), ref.logits(h), rtol=1e-5, atol=1e-7)
        assert torch.allclose(ours.logits(h), F.linear(h * BASE / width, ours.lm_head.weight), rtol=1e-5, atol=1e-7)

    # and so the same training: three AdamW steps from the same weights
    ref.load_state_dict(ours.state_dict())
    ids = torch.randint(0, V, (4, T), generator=torch.Generator().manual_seed(2))
    a = train(ours, adamw(ours, cfg), ids, 3)
    b = train(ref, theirs, ids, 3)
    assert (a - b).abs().max() <= 1e-5 * max(1.0, float(b.abs().max()))


# -- 2. the coordinate check (Yang et al. 2022, §C; mup's get_coord_data) -----------------------

WIDTHS = (64, 128, 256, 512)


def coordinates(
    family: str,
    parametrization: str,
    width: int,
    steps: int = 5,
    optim: OptimConfig | None = None,
    width_rates: bool = True,
) -> dict[str, float]:
    """Mean |coordinate| of each layer's output (token embedding, every attention, cross-attention
    and feed-forward sub-layer, logits) after `steps` steps of `optim` (default Adam, lr 2e-3, no
    weight decay; `width_rates=False`: without μP's per-parameter rates) on one fixed batch of
    random tokens, each position predicting its own token; depth 2 (encoder-decoder: 1 + 1), 4
    heads, the same seed at every width."""
    cfg = config(family, width, parametrization, n_layers=1 if family == "encoder_decoder" else 2, vocab_size=64)
    model = build(cfg)
    optim = optim or OptimConfig(kind="adam", lr=2e-3, weight_decay=0.0)
    optimizer = build_optimizer(model, optim, scales=optimizer_scales(model, cfg) if width_rates else {})
    ids = torch.randint(0, 64, (8, 16), generator=torch.Generator().manual_seed(1))
    inputs = {"decoder_input_ids": ids} if family == "encoder_decoder" else {}
    sizes: dict[str, float] = {}
    layers = {"embedding": model.embed}
    for stack_name in ("encoder", "decoder"):
        for i, block in enumerate(getattr(model, stack_name).layers if hasattr(model, stack_name) else []):
            layers[f"{stack_name}.{i}.attention"] = block.self_attn
            layers[f"{stack_name}.{i}.feed_forward"] = block.ff
            if block.cross_attn is not None:
                layers[f"{stack_name}.{i}.cross_attention"] = block.cross_attn
    for name, layer in layers.items():
        layer.register_forward_hook(
            lambda _m, _i, out, name=name: sizes.__setitem__(name, float(out.detach().abs().mean()))
        )
    for step in range(steps + 1):
        logits = model(ids, **inputs).logits  # (B, T, V)
        sizes["logits"] = float(logits.detach().abs().mean())
        if step == steps:
            return sizes
        optimizer.zero_grad()
        F.cross_entropy(logits.reshape(-1, 64), ids.reshape(-1)).backward()
        optimizer.step()


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.slow
def test_coordinates_keep_their_size_across_widths_under_mup_and_blow_up_under_standard(family, one_thread):
    """Under μP every layer's output keeps its size from width 64 to 512 (at most 2x larger; the
    logits shrink to about half, toward their width-independent limit: their initial part
    (1/m)·W0·h falls as 1/sqrt(m)); under standard the hidden layers and the logits grow."""
    growth = {}
    for parametrization in ("standard", "mup"):
        sizes = {width: coordinates(family, parametrization, width) for width in WIDTHS}
        growth[parametrization] = {
            name: [sizes[w][name] / sizes[WIDTHS[0]][name] for w in WIDTHS[1:]] for name in sizes[WIDTHS[0]]
        }
    for name, ratios in growth["mup"].items():
        assert all(0.4 < r < 2.0 for r in ratios), (name, ratios)
    standard = growth["standard"]
    assert standard["logits"][-1] > 3.0, standard["logits"]
    hidden = [ratios[-1] for name, ratios in standard.items() if name not in ("embedding", "logits")]
    assert min(hidden) > 10.0, standard


# Newton-Schulz in float32: on a CPU without bfloat16 matrix units the default bfloat16 iteration
# is ~30x slower at width 256 (the check at 512 took most of an hour); the scaling rules checked
# here do not depend on the iteration's precision
MUON = {
    "original": OptimConfig(
        kind="muon", lr=2e-3, muon_lr=0.02, weight_decay=0.0, adjust_lr_fn="original", ns_precision="float32"
    ),
    "match_rms_adamw": OptimConfig(kind="muon", lr=2e-3, muon_lr=0.02, weight_decay=0.0, ns_precision="float32"),
}


def _growth(parametrization: str, optim: OptimConfig, width_rates: bool = True) -> dict[str, list[float]]:
    sizes = {
        width: coordinates("decoder_only", parametrization, width, optim=optim, width_rates=width_rates)
        for width in WIDTHS
    }
    return {name: [sizes[w][name] / sizes[WIDTHS[0]][name] for w in WIDTHS[1:]] for name in sizes[WIDTHS[0]]}


@pytest.mark.slow
def test_muon_under_mup_keeps_the_coordinates_size_across_widths_and_not_under_standard(one_thread):
    """optim=muon under μP (its hidden matrices at the spectral rule, zoo.config.facts.muon; the
    rest at μP's AdamW rules) passes the same check as Adam under μP, with either shape factor;
    without the rule (μP's forward and start, match_rms_adamw's rate at every width) and under
    standard the hidden layers' outputs grow with the width."""
    for adjust, optim in MUON.items():
        for name, ratios in _growth("mup", optim).items():
            assert all(0.4 < r < 2.0 for r in ratios), (adjust, name, ratios)
    for parametrization, width_rates, least in (("mup", False, 3.0), ("standard", True, 4.0)):
        grown = _growth(parametrization, MUON["match_rms_adamw"], width_rates)
        hidden = [ratios[-1] for name, ratios in grown.items() if name not in ("embedding", "logits")]
        assert min(hidden) > least, (parametrization, grown)


@pytest.mark.parametrize("adjust, expected", [("original", (1.0, 1.0)), ("match_rms_adamw", (2**-0.5, 2**0.5))])
def test_muon_under_mup_gives_its_matrices_the_spectral_rule_and_the_rest_mups(adjust, expected):
    """At m = 2 Muon's hidden matrices learn at muon_lr x 1 (original) or x 1/sqrt(2) with decay x
    sqrt(2) (match_rms_adamw), not μP's AdamW lr / 2; what AdamW steps keeps μP's rules."""
    cfg = config("encoder_only", 2 * BASE, head_transform=True)
    model = build(cfg)
    optim = OptimConfig(kind="muon", lr=1e-3, muon_lr=0.01, weight_decay=0.1, adjust_lr_fn=adjust)
    optimizer = build_optimizer(model, optim, scales=optimizer_scales(model, cfg))
    (muon_group,) = optimizer.muon.param_groups
    assert muon_group["lr"] == pytest.approx(0.01 * expected[0])
    assert muon_group["weight_decay"] == pytest.approx(0.1 * expected[1])
    transform = model.head_transform.dense.weight  # a hidden matrix outside the layers: AdamW's
    (group,) = [g for g in optimizer.adamw.param_groups if any(p is transform for p in g["params"])]
    assert group["lr"] == pytest.approx(1e-3 / 2) and group["weight_decay"] == pytest.approx(0.1 * 2)


# -- 3. at the base width, the standard model exactly ------------------------------------------


# the head options μP treats apart, off and all on
BASE_WIDTH_OPTIONS = {
    "default head": {},
    "every head option": {
        "scale_embeddings": True,
        "scale_output": True,
        "tie_embeddings": False,
        "head_transform": True,
        "output_bias": True,
        "attention_scale": 1.0,
    },
}


def assert_standard_at_the_base_width(family, options):
    standard_cfg = config(family, BASE, "standard", **options)
    mup_cfg = config(family, BASE, "mup", **options)
    assert mup_cfg.width_mult == 1.0
    a, b = build(standard_cfg), build(mup_cfg)
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    opt_a, opt_b = adamw(a, standard_cfg), adamw(b, mup_cfg)
    names_a, names_b = ({id(p): n for n, p in model.named_parameters()} for model in (a, b))
    groups_a = [(g["lr"], g["weight_decay"], [names_a[id(p)] for p in g["params"]]) for g in opt_a.param_groups]
    groups_b = [(g["lr"], g["weight_decay"], [names_b[id(p)] for p in g["params"]]) for g in opt_b.param_groups]
    assert groups_a == groups_b and len(groups_a) == 2
    ids = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(3))
    assert torch.equal(train(a, opt_a, ids, 2), train(b, opt_b, ids, 2))


# -- 4. the rules, written out from the paper (Tables 3 and 8) --------------------------------


def test_the_multipliers_follow_the_width():
    cfg = config("decoder_only", 256)  # m = 4, Dh = 64, base Dh = 16
    assert cfg.width_mult == 4.0 and cfg.base_head_dim == 16
    assert cfg.attention_multiplier == pytest.approx(math.sqrt(16) / 64)  # 1/Dh, equal to 1/sqrt(Dh) at the base
    assert cfg.output_multiplier == pytest.approx(1 / 4)
    assert config("decoder_only", 256, mup_base_head_dim=64).attention_multiplier is None  # heads grew, not Dh
    assert config("decoder_only", 256, attention_scale=1.0).attention_multiplier == pytest.approx(16 / 64)
    # widths standard reads from D are read at the base width: the embeddings are input weights
    scaled = config(
        "decoder_only", 256, scale_embeddings=True, scale_output=True, tie_embeddings=False, embed_init="unit"
    )
    assert scaled.embedding_multiplier == pytest.approx(8.0) and scaled.embedding_std == pytest.approx(1 / 8)
    assert scaled.output_multiplier == pytest.approx(1 / 8 / 4)
    plain = config("decoder_only", 256, "standard", scale_embeddings=True, scale_output=True)
    assert plain.embedding_multiplier == 16.0 and plain.output_multiplier == 1 / 16 and plain.width_mult == 1.0

    model = build(scaled)
    assert model.embed.multiplier == pytest.approx(8.0)
    assert float(model.embed.weight.detach().std()) == pytest.approx(1 / 8, rel=0.05)
    attention = model.decoder.layers[0].self_attn
    assert attention.scale == pytest.approx(1 / 16)
    assert float(attention.qkv_proj.weight.detach().std()) == pytest.approx(0.02 / 2, rel=0.05)  # init_std / sqrt(m)
    assert float(model.lm_head.weight.detach().std()) == pytest.approx(0.02, rel=0.05)  # the readout keeps its init


def test_weight_decay_stays_on_the_matrices_and_the_hidden_ones_learn_at_lr_over_m():
    cfg = config("encoder_only", 256, head_transform=True, tie_embeddings=False)
    model = build(cfg)
    rates = per_parameter(model, adamw(model, cfg))
    for name, (rate, decay) in rates.items():
        hidden = (
            model.get_parameter(name).dim() == 2 and not name.startswith(("embed", "lm_head")) and "table" not in name
        )
        assert (rate, decay) == pytest.approx((1e-2 / 4, 0.4) if hidden else (1e-2, 0.0)), name
    assert rates["head_transform.dense.weight"] == pytest.approx((1e-2 / 4, 0.4))
    assert rates["lm_head.weight"] == pytest.approx((1e-2, 0.0))  # an output embedding: no decay, as standard


def test_the_schedule_multiplies_each_groups_own_rate():
    """The task's optimizer and LambdaLR: after the first step each group is at its own initial
    rate times the schedule (constant, warmup 4: 2/4), the hidden matrices' at optim.lr / m."""
    from zoo.tasks.causal_lm import CausalLM

    model = config("decoder_only", 256).to_dict()
    task = CausalLM(
        model=model, task={"kind": "causal_lm"}, optim={"lr": 1e-2}, scheduler={"kind": "constant", "warmup_steps": 4}
    )
    setup = task.configure_optimizers()
    optimizer, scheduler = setup["optimizer"], setup["lr_scheduler"]["scheduler"]
    # no decay (embeddings, biases, norms), then the hidden matrices (every decayed one of a decoder)
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([1e-2 / 4, 1e-2 / 4 / 4])
    optimizer.step()
    scheduler.step()
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([1e-2 * 2 / 4, 1e-2 / 4 * 2 / 4])
    rates = per_parameter(task.model, optimizer)
    assert rates["decoder.layers.0.self_attn.qkv_proj.weight"][0] == pytest.approx(1e-2 / 4 * 2 / 4)
    assert rates["embed.weight"][0] == pytest.approx(1e-2 * 2 / 4)


def test_a_classifier_head_is_an_output_layer():
    from zoo.tasks.classification import Classification

    model = config("encoder_only", 256).to_dict()
    task = Classification(
        model=model,
        task={"kind": "classification"},
        optim={"lr": 1e-2},
        scheduler={"kind": "constant"},
        extra={"labels": ["a", "b"]},
    )
    ids = torch.randint(0, V, (2, T))
    with torch.no_grad():
        hidden = task.model(ids, return_logits=False).hidden_states[:, 0]  # cls pooling
        assert torch.allclose(task.classify(ids), task.head(hidden / 4), atol=1e-6)
    rates = per_parameter(task, task.configure_optimizers()["optimizer"], "initial_lr")
    assert rates["head.weight"] == pytest.approx((1e-2, 0.1))  # decayed like any matrix, at the base rate
    assert rates["model.encoder.layers.0.ff.w_out.weight"] == pytest.approx((1e-2 / 4, 0.4))


# -- 5. options ---------------------------------------------------------------------------------


def test_an_unknown_parametrization_is_refused_with_the_allowed_values():
    from zoo.cli.refusals import refusal

    with pytest.raises(ConfigError) as err:
        ModelConfig(parametrization="spectral")
    assert str(err.value) == "model.parametrization='spectral' is not allowed; choose one of: standard, mup"
    message = refusal(["model.parametrization=spectral"])
    assert "\n" not in message and "expected one of [standard, mup]" in message


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"parametrization": "mup", "mup_base_d_model": 0}, "model.mup_base_d_model must be a positive integer, got 0"),
        (
            {"parametrization": "mup", "mup_base_d_model": -64},
            "model.mup_base_d_model must be a positive integer, got -64",
        ),
        (
            {"parametrization": "mup", "mup_base_head_dim": 0},
            "model.mup_base_head_dim must be a positive integer, got 0",
        ),
        ({"mup_base_d_model": 64}, "model.mup_base_d_model=64 only applies to model.parametrization=mup, not standard"),
        (
            {"mup_base_head_dim": 16},
            "model.mup_base_head_dim=16 only applies to model.parametrization=mup, not standard",
        ),
    ],
)
def test_base_widths_are_checked(kw, message):
    with pytest.raises(ConfigError) as err:
        ModelConfig(**kw)
    assert str(err.value) == message


def test_the_base_width_has_a_default_and_round_trips():
    cfg = ModelConfig(parametrization="mup")
    assert cfg.mup_base_d_model == MUP_BASE_D_MODEL and cfg.width_mult == 256 / MUP_BASE_D_MODEL
    assert ModelConfig(**cfg.to_dict()) == cfg
    assert ModelConfig().mup_base_d_model is None and ModelConfig().width_mult == 1.0


def test_a_mup_model_matches_no_hugging_face_family():
    """Its multipliers (logits x 1/m, attention 1/Dh) have no transformers equivalent: zoo-export refuses."""
    from zoo.interop.hf import CONVERTERS

    assert any(c.matches(config("decoder_only", 256, "standard")) for c in CONVERTERS.values())
    assert not any(c.matches(config("decoder_only", 256)) for c in CONVERTERS.values())


def test_a_checkpoint_from_before_the_option_resumes_as_standard():
    """Its saved model config has no parametrization keys: it ran as standard, so the command's
    default resumes it, and mup is refused."""
    from zoo.config.records.hparams import from_hparams
    from zoo.training.resume.match import ResumeMismatch, check_resume, saved_sections

    model = {k: v for k, v in ModelConfig().to_dict().items() if not k.startswith(("parametrization", "mup_"))}
    old = {"model": model, "task": {"kind": "causal_lm"}}
    check_resume(saved_sections(from_hparams(old)), {"model": ModelConfig().to_dict()}, "the checkpoint")
    with pytest.raises(ResumeMismatch, match="model.parametrization='standard' in the checkpoint, 'mup' here"):
        check_resume(
            saved_sections(from_hparams(old)), {"model": ModelConfig(parametrization="mup").to_dict()}, "the checkpoint"
        )
