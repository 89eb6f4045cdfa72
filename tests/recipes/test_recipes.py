"""Every recipe composes with its published settings and trains a few steps on a tiny local
data override (the Hub datasets they name are not reachable here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import zoo
from zoo import train
from zoo.config import as_model_config

RECIPES = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "recipes").glob("*.yaml"))

PUBLISHED = {
    # recipe: (d_model, n_heads, layers, d_ff)
    "vaswani_base": (512, 8, 6, 2048),
    "bert_base": (768, 12, 12, 3072),
    "gpt2_small": (768, 12, 12, 3072),
    "t5_small": (512, 8, 6, 2048),
}


def test_recipes_exist():
    assert {"vaswani_base", "bert_base", "gpt2_small", "t5_small", "llama_small", "numbers_seq2seq"} <= set(RECIPES)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_recipe_has_the_published_sizes(name):
    m = as_model_config(zoo.compose(config_name=name).model)
    assert (m.d_model, m.n_heads, m.n_layers, m.d_ff) == PUBLISHED[name]


def test_vaswani_recipe_optimizer_and_schedule():
    cfg = zoo.compose(config_name="vaswani_base")
    assert cfg.optim.kind == "adam" and list(cfg.optim.betas) == [0.9, 0.98] and cfg.optim.eps == 1e-9
    assert cfg.scheduler.kind == "inverse_sqrt" and cfg.scheduler.warmup_steps == 4000
    assert cfg.task.label_smoothing == 0.1 and cfg.model.dropout == 0.1
    assert cfg.model.norm == "post" and cfg.model.position.kind == "sinusoidal"


def _tiny_data(tmp_path: Path, cfg) -> list[str]:
    if cfg.data.source == "recall":  # drawn, not read: a few short sequences of its own kind
        return ["data.recall_examples=64", "data.recall_pairs=4"]
    rows = []
    for i in range(200):
        text = f"the number {i} is written as {i} in digits and said aloud"
        rows.append(
            {
                "text": text,
                "translation": {"en": f"number {i}", "de": f"Nummer {i}", "ro": f"numarul {i}"},
                "source": f"{i}",
                "target": f"n{i}",
                "label": i % 2,
            }
        )
    path = tmp_path / "tiny.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    hub = [f"data.{k}=null" for k in ("hub_name", "hub_config") if cfg.data.get(k)]
    return ["data=local", f"data.path={path}", *hub]


@pytest.mark.parametrize("name", RECIPES)
@pytest.mark.slow
def test_recipe_trains_a_few_steps_on_tiny_local_data(name, tmp_path):
    base = zoo.compose(config_name=name)
    enc_dec = base.model.family == "encoder_decoder"
    overrides = [
        *_tiny_data(tmp_path, base),
        "trainer=cpu",
        # bytes at the default size (a recipe's SentencePiece size does not apply to bytes); a
        # recall recipe keeps its one-id-per-symbol tokenizer
        *(["tokenizer=byte", "tokenizer.vocab_size=8192"] if base.data.source != "recall" else []),
        "model.d_model=32",
        "model.n_heads=2",
        "model.n_kv_heads=null",
        "model.n_layers=1",
        "model.param_budget=null",
        "model.d_ff=64",
        "model.vocab_size=300",
        "model.max_seq_len=64",
        "data.seq_len=32",
        "data.global_batch_size=4",
        "trainer.max_steps=2",
        "trainer.val_check_interval=2",
        "trainer.limit_val_batches=1",
        "callbacks.progress_bar=none",
        "scheduler.warmup_steps=1",
    ]
    if enc_dec:
        overrides.append("model.n_decoder_layers=1")
    # the recipe's own columns (e.g. translation.en) are kept: the tiny file has them
    result = train(zoo.compose(overrides, config_name=name), tmp_path / "run")
    assert result.summary["global_step"] == 2
    assert result.summary["metrics"]["val/loss"] > 0


@pytest.mark.slow
def test_the_glu_scaling_grid_matches_parameters_and_budgets_tokens_by_one_rule():
    """recipes/scale_glu.yaml: at every size, the four feed-forward units (recipes/arm/glu/*) have
    the same non-embedding parameter count, trainer.max_steps trains 3 tokens per parameter, and
    μP's base is the smallest size, where the model is the standard one."""
    from zoo.config.schema.params import non_embedding_params

    rates = {}
    for size, width in (("xs", 48), ("s", 96), ("m", 144), ("l", 192)):
        counts, steps = set(), set()
        for activation in ("relu", "gelu", "swiglu", "geglu"):
            cfg = zoo.compose([f"size={size}", f"arm/glu={activation}"], config_name="scale_glu")
            model = as_model_config(cfg.model)
            assert model.activation == activation and model.parametrization == "mup"
            assert model.mup_base_d_model == 48 and model.mup_base_head_dim == 24
            assert model.d_model == width and model.d_ff == (
                width * 8 // 3 if activation.endswith("glu") else 4 * width
            )
            counts.add(non_embedding_params(model))
            steps.add(cfg.trainer.max_steps)
            rates.setdefault(activation, set()).add(cfg.optim.lr)
            tokens_per_step = cfg.data.global_batch_size * cfg.data.seq_len
            assert (
                (cfg.trainer.max_steps - 1) * tokens_per_step
                < 3 * non_embedding_params(model)
                <= cfg.trainer.max_steps * tokens_per_step
            )
            assert cfg.trainer.val_check_interval == cfg.trainer.max_steps
        assert len(counts) == 1 and len(steps) == 1, (size, counts, steps)
    assert all(len(r) == 1 for r in rates.values()), rates  # one rate per unit at every size
    xs = as_model_config(zoo.compose(["size=xs"], config_name="scale_glu").model)
    assert xs.d_model == xs.mup_base_d_model and xs.d_model // xs.n_heads == xs.mup_base_head_dim
    tune = zoo.compose(["size=xs", "model.activation=swiglu", "optim.lr=1.6e-2"], config_name="scale_glu_tune")
    assert tune.model.activation == "swiglu" and tune.optim.lr == 1.6e-2 and tune.seed == 0


@pytest.mark.slow
def test_the_five_width_glu_grid_matches_parameters_at_every_width_and_trains_ten_tokens_each():
    """recipes/scale_glu_dn10.yaml: at each of its five widths (24 to 96, some not divisible by 48)
    the gated units' d_ff = 8·D/3 (model.ff_mult) gives exactly the plain units' non-embedding
    parameters, and trainer.max_steps trains 10 tokens per parameter."""
    from zoo.config.schema.params import non_embedding_params

    widths = []
    for size in ("d24", "d36", "xs", "d72", "s"):
        counts, steps = set(), set()
        for activation in ("relu", "gelu", "swiglu", "geglu"):
            cfg = zoo.compose([f"size={size}", f"arm/glu={activation}"], config_name="scale_glu_dn10")
            model = as_model_config(cfg.model)
            assert model.d_ff == (model.d_model * 8 // 3 if activation.endswith("glu") else 4 * model.d_model)
            n = non_embedding_params(model)
            counts.add(n)
            steps.add(cfg.trainer.max_steps)
            tokens_per_step = cfg.data.global_batch_size * cfg.data.seq_len
            assert (cfg.trainer.max_steps - 1) * tokens_per_step < 10 * n <= cfg.trainer.max_steps * tokens_per_step
        assert len(counts) == 1 and len(steps) == 1, (size, counts, steps)
        widths.append(model.d_model)
    assert widths == [24, 36, 48, 72, 96]


def test_steps_for_tokens_refuses_a_rule_that_trains_nothing():
    from zoo.config.errors import ConfigError
    from zoo.config.schema.params import steps_for_tokens

    model = as_model_config(zoo.compose(config_name="scale_glu").model)
    with pytest.raises(ConfigError, match="tokens per parameter must be > 0, got 0.0"):
        steps_for_tokens(model, 0.0, 1024)
    assert steps_for_tokens(model, 1e-9, 1024) == 1
    from zoo.config.schema.validate import validate

    bad = zoo.compose(["trainer.max_steps=${zoo.steps_for_tokens:0}"], config_name="scale_glu")
    with pytest.raises(ConfigError, match=r"^trainer.max_steps: tokens per parameter must be > 0, got 0.0$"):
        validate(bad)


@pytest.mark.parametrize("max_steps, warmup, val_every", [(1, 1, 1), (10, 1, 5), (100, 10, 50), (1000, 100, 500)])
def test_the_quick_recipe_fits_any_run_length(max_steps, warmup, val_every):
    from zoo.config.schema.validate import validate

    zc = validate(
        zoo.compose(
            [f"trainer.max_steps={max_steps}", "scheduler=constant"]
            if max_steps == 1
            else [f"trainer.max_steps={max_steps}"],
            config_name="quick",
        )
    )
    assert (zc.scheduler.warmup_steps, zc.trainer["val_check_interval"]) == (warmup, val_every)


def test_a_warmup_longer_than_the_run_is_refused_with_the_fix():
    from zoo.config.errors import ConfigError
    from zoo.config.schema.validate import validate

    with pytest.raises(ConfigError, match=r"scheduler.warmup_steps=1 \(a tenth of the run\), or run -cn quick"):
        validate(zoo.compose(["trainer.max_steps=10"]))
    with pytest.raises(ConfigError, match="share in"):
        validate(zoo.compose(["scheduler.warmup_steps=${zoo.share_of_steps:1.5}"]))


def test_the_groups_a_recipe_chooses_follow_its_parent_recipes():
    """What `composed from:` marks as (recipe): the groups of a recipe's defaults list and of the
    recipes it builds on."""
    from zoo.config.paths import recipe_groups

    assert recipe_groups("ablate_norm") == {"arm/norm", "model"}
    assert recipe_groups("ablate_norm_tuned") == recipe_groups("ablate_norm")  # builds on it, adds none
    assert recipe_groups("quick") == {"tokenizer"}
    assert recipe_groups("mup_transfer_fine") == recipe_groups("mup_transfer") >= {"arm/parametrization", "tokenizer"}
    assert recipe_groups("no_such_recipe") == set()


def planned_runs(name: str) -> int:
    """The runs `zoo-train -cn NAME` starts: 1, or the product of the sizes of the sweep in
    hydra.sweeper.params when the recipe sets hydra.mode MULTIRUN (Hydra's own parser), or the
    Optuna sweeper's hydra.sweeper.n_trials."""
    import math

    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    cfg = zoo.compose(config_name=name, return_hydra_config=True, check=False)
    if str(OmegaConf.select(cfg, "hydra.mode", default="")) != "RunMode.MULTIRUN":
        return 1
    if OmegaConf.select(cfg, "hydra.sweeper.n_trials", default=None) is not None:
        return int(cfg.hydra.sweeper.n_trials)
    params = OmegaConf.to_container(OmegaConf.select(cfg, "hydra.sweeper.params", default={}) or {}, resolve=False)
    parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()])
    return math.prod(len(list(o.sweep_string_iterator())) if o.is_sweep_override() else 1 for o in parsed)


def _header(name: str) -> str:
    lines = (Path(__file__).resolve().parents[2] / "recipes" / f"{name}.yaml").read_text().splitlines()
    return "\n".join(line for line in lines if line.startswith("#"))


@pytest.mark.parametrize("name", RECIPES)
def test_each_recipe_states_its_run_count_and_time_in_its_header_and_the_docs(name):
    import re

    runs = planned_runs(name)
    cost = re.search(r"^# Cost: +(\d+) runs?\b(.*)", _header(name), re.M)
    assert cost, f"recipes/{name}.yaml: no '# Cost:' line"
    assert int(cost.group(1)) == runs, (name, cost.group(0), runs)
    assert re.search(r"\d+ (s|min|h)\b|not timed", cost.group(2)), cost.group(0)
    docs = Path(__file__).resolve().parents[2] / "docs"
    tables = (docs / "composing.md").read_text() + (docs / "ablations.md").read_text()  # single runs, sweeps
    (row,) = [line for line in tables.splitlines() if re.match(rf"\| `{name}`", line)]
    assert re.search(rf"\| {runs} runs?[,;| ]", row), row
