"""The ablation recipes of the block, training and masking options are one change at a time:
every value each recipe sweeps composes and validates, each arm differs from the recipe's first
(baseline) arm only in the keys its change names, and arms of one size have the same
non-embedding parameter count (model.param_budget pays for what a change adds).

A recipe whose keys this tree does not have yet is skipped, naming them (the options are built
apart and merged one by one); once they are here, its test runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

import zoo
from zoo.config import as_model_config
from zoo.config.schema.params import non_embedding_params

CONF = Path(__file__).resolve().parents[2] / "conf"

# recipe: (what it needs that a tree may lack: dotted keys of the default config, or GROUP=OPTION
# files of conf/; {swept key: the keys its arms may change besides it}; keys that size the model)
RECIPES = {
    "ablate_qk_norm": (["model.qk_norm"], {"model.qk_norm": {"model.d_ff"}}, ()),
    "ablate_z_loss": (["task.z_loss"], {"task.z_loss": set()}, ()),
    "ablate_softcap": (["model.attn_softcap", "model.final_softcap"], {"arm/softcap": set()}, ()),
    "ablate_sliding_window": (["model.attention", "model.window", "model.global_every"], {"arm/window": set()}, ()),
    "ablate_parallel_block": (["model.block"], {"model.block": {"model.d_ff"}}, ()),
    "ablate_optimizer": (["optim=muon"], {"optim": {"optim.*"}, "optim.lr": set()}, ()),
    "ablate_schedule": (["scheduler=wsd", "scheduler=linear"], {"scheduler": {"scheduler.*"}}, ()),
    "ablate_document_mask": (["data.document_mask"], {"data.document_mask": set()}, ()),
    "repro_wortsman_instability": (
        ["model.qk_norm", "task.z_loss"],
        {"arm/stability": set(), "model.d_model": set(), "optim.lr": set()},
        ("model.d_model",),
    ),
    "repro_wsd_cooldown": ([], {"trainer.max_steps": set()}, ()),
}

# what each arm of a config group sets (its YAML's keys)
GROUP_KEYS = {
    "arm/softcap": {"model.attn_softcap", "model.final_softcap"},
    "arm/window": {"model.attention", "model.window", "model.global_every"},
    "arm/stability": {"model.qk_norm", "task.z_loss"},
}


def _missing(needs: list[str]) -> list[str]:
    default = OmegaConf.to_container(zoo.compose(check=False), resolve=False)
    missing = []
    for need in needs:
        if "=" in need:
            group, option = need.split("=")
            if not (CONF / group / f"{option}.yaml").is_file():
                missing.append(need)
            continue
        node = default
        for part in need.split("."):
            if not isinstance(node, dict) or part not in node:
                missing.append(need)
                break
            node = node[part]
    return missing


def _flat(cfg, prefix: str = "") -> dict:
    out = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, f"{name}."))
        else:
            out[name] = value
    return out


def _changed(a: dict, b: dict) -> set[str]:
    return {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


def _allowed(changed: set[str], allowed: set[str]) -> set[str]:
    """The keys of `changed` that `allowed` does not cover ("optim.*": every key of optim)."""
    return {
        k for k in changed if k not in allowed and not any(a.endswith(".*") and k.startswith(a[:-1]) for a in allowed)
    }


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_each_arm_is_one_change_at_a_matched_budget(name):
    needs, sweeps, sizes = RECIPES[name]
    missing = _missing(needs)
    if missing:
        pytest.skip(f"{name} sets {', '.join(missing)}, not in this tree yet")
    params = zoo.compose(config_name=name, return_hydra_config=True, check=False).hydra.sweeper.params
    assert set(params) == set(sweeps) | {"seed"}, "the recipe sweeps what this test expects"
    assert str(params["seed"]) == "0,1,2"
    firsts = {key: str(values).split(",")[0] for key, values in params.items() if key != "seed"}
    base_cfg = zoo.compose([f"{k}={v}" for k, v in firsts.items()], config_name=name)
    base = _flat(OmegaConf.to_container(base_cfg, resolve=True))
    base_params = non_embedding_params(as_model_config(base_cfg.model))
    for key, values in params.items():
        if key == "seed":
            continue
        for value in str(values).split(",")[1:]:
            overrides = [f"{k}={value if k == key else v}" for k, v in firsts.items()]
            cfg = zoo.compose(overrides, config_name=name)
            zoo.validate(cfg)  # every arm is a valid run, refused nowhere
            changed = _changed(base, _flat(OmegaConf.to_container(cfg, resolve=True)))
            own = GROUP_KEYS.get(key, {key}) if "/" in key else {key}
            assert changed, f"{key}={value} changes nothing"
            assert _allowed(changed, own | sweeps[key]) == set(), f"{key}={value} changes more than its arm"
            if key not in sizes:
                assert non_embedding_params(as_model_config(cfg.model)) == pytest.approx(base_params, rel=0.01), (
                    f"{key}={value}: not the baseline's parameter budget"
                )


def test_the_wortsman_sweep_spans_three_orders_of_magnitude_of_rates():
    params = zoo.compose(
        config_name="repro_wortsman_instability", return_hydra_config=True, check=False
    ).hydra.sweeper.params
    rates = [float(r) for r in str(params["optim.lr"]).split(",")]
    assert len(rates) >= 6 and max(rates) / min(rates) >= 1000
    assert len(str(params["model.d_model"]).split(",")) >= 2
    assert str(params["arm/stability"]).split(",") == ["baseline", "qk_norm", "z_loss", "both"]
    cfg = zoo.validate(zoo.compose(["model.d_model=64"], config_name="repro_wortsman_instability"))
    assert cfg.callbacks.instability_every == 10  # the attention and output logits are logged
