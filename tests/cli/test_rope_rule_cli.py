"""A trained RoPE checkpoint run past its training length with another context-extension rule:
`zoo-eval` and `zoo-generate` take `model.position.scaling` and its parameters at run time
(and nothing else of the architecture), on a model trained here."""

from __future__ import annotations

import json

import pytest

import zoo
from tests.cli.conftest import missed, tiny_overrides
from zoo import train

TRAINED = 16  # the training windows: the rules extend from here


@pytest.fixture(scope="module")
def rope_lm(tmp_path_factory):
    run = tmp_path_factory.mktemp("rope")
    overrides = [o for o in tiny_overrides(run) if not o.startswith(("hydra.", "data.seq_len"))]
    train(zoo.compose([*overrides, "model/position=rope", f"data.seq_len={TRAINED}", "tokenizer=char"]), run)
    return run / "checkpoints" / "last.ckpt"


def loss(cli_here, ckpt, *rule: str) -> float:
    """zoo-eval's loss over windows 3 x the training length, under `rule`."""
    report = cli_here("eval", f"ckpt={ckpt}", f"data.seq_len={3 * TRAINED}", "limit_batches=1", *rule)
    assert report.returncode == 0, report.stderr[-2000:]
    return json.loads(report.stdout)["metrics"]["loss"]


def test_zoo_eval_runs_a_checkpoint_under_each_rule_past_its_length(rope_lm, cli_here):
    plain = loss(cli_here, rope_lm)
    same = "model.position.original_max_seq_len=16"
    rules = {
        "yarn": loss(cli_here, rope_lm, "model.position.scaling=yarn", "model.position.scale=4", same),
        "dynamic": loss(cli_here, rope_lm, "model.position.scaling=dynamic", "model.position.scale=4", same),
        "ntk": loss(cli_here, rope_lm, "model.position.scaling=ntk", "model.position.scale=4"),
        "linear": loss(cli_here, rope_lm, "model.position.scale=4"),
    }
    assert all(value != plain for value in rules.values()), (plain, rules)
    assert loss(cli_here, rope_lm, "model.position.scaling=yarn", "model.position.scale=1") == plain  # factor 1: none


def test_zoo_generate_takes_a_rule(rope_lm, cli_here):
    args = [f"ckpt={rope_lm}", "prompt=And God said", f"max_new_tokens={2 * TRAINED}"]
    plain = cli_here("generate", *args)
    yarn = cli_here("generate", *args, "model.position.scaling=yarn", "model.position.scale=4")
    assert plain.returncode == yarn.returncode == 0, (plain.stderr[-2000:], yarn.stderr[-2000:])
    assert yarn.stdout.startswith("And God said")


@pytest.mark.parametrize(
    "override, fragments",
    [
        ("model.d_model=64", ["model.d_model=64", "only RoPE's scaling rule may change"]),
        ("model.position.theta=500", ["model.position.theta=500", "only RoPE's scaling rule may change"]),
        ("model.position.beta_fast=8", ["model.position.beta_fast only applies to model.position.scaling=yarn"]),
        ("model.position.scaling=longrope", ["model.position.scaling='longrope' is not allowed"]),
    ],
)
@pytest.mark.parametrize("tool", ["eval", "generate"])
def test_anything_else_of_the_model_is_refused_on_one_line(rope_lm, cli_here, tool, override, fragments):
    prompt = ["prompt=And"] if tool == "generate" else []
    assert missed(cli_here(tool, f"ckpt={rope_lm}", *prompt, override), tool, *fragments) == []
