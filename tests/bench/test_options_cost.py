"""benchmarks/options_cost.py: each arm builds what its overrides name, from the baseline's seed,
on the batch its data key asks for; the rows divide by the first arm; a bad arm is refused before
anything is built. (The figures themselves are measured by running the script, never asserted.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import options_cost  # noqa: E402

from zoo.config.errors import ConfigError  # noqa: E402

# the tests' tiny model; max_seq_len holds the sliding arms' window of 64, 4 layers two value tables
TINY = ["model.d_model=16", "model.n_heads=2", "model.n_layers=4", "model.vocab_size=64", "model.max_seq_len=64"]
CPU = torch.device("cpu")


def _build(names):
    return options_cost.build_arms(names, shape=TINY, batch=2, seq_len=16, doc_len=4, device=CPU)


def _same(got, given: str) -> bool:
    got = got.value if hasattr(got, "value") else got
    if isinstance(got, bool):
        return str(got).lower() == given.lower()
    if isinstance(got, (int, float)):
        return float(got) == float(given)
    return str(got) == given


@pytest.mark.parametrize("name", list(options_cost.ARMS))
def test_each_arm_builds_what_it_names(name):
    base, arm = _build(["baseline", name])
    task, optim = arm.subject.task.hparams["task"], arm.subject.task.hparams["optim"]
    for override in arm.overrides:
        key, value = override.split("=", 1)
        group, field = key.split(".", 1)
        if group == "model":
            assert _same(getattr(arm.subject.model.config, field), value), override
        elif group == "task":
            assert _same(task[field], value), override
        elif group == "optim":
            assert _same(optim[field], value), override
    # one key changed, all else the baseline's: the same seed gives the same token embedding
    assert torch.equal(
        arm.subject.model.state_dict()[_embedding(arm)], base.subject.model.state_dict()[_embedding(base)]
    )
    documents = options_cost.DOCUMENT_MASK in {o.split("=", 1)[0] for o in arm.overrides}
    assert ("document_ids" in arm.batch) == documents
    if documents:  # the ids reach the model: documents attended apart change the loss
        task = arm.subject.task
        without = {k: v for k, v in arm.batch.items() if k != "document_ids"}
        with torch.no_grad():
            assert not torch.allclose(task.training_loss(arm.batch)[0], task.training_loss(without)[0])
    assert torch.equal(arm.batch["input_ids"], base.batch["input_ids"])


def _embedding(arm) -> str:
    return next(k for k in arm.subject.model.state_dict() if k.endswith("weight") and "emb" in k)


def test_the_muon_arm_trains_with_muon_and_the_baseline_with_adamw():
    base, muon = _build(["baseline", "optim.kind=muon"])
    assert isinstance(base.subject.optimizer, torch.optim.AdamW)
    assert "muon" in type(muon.subject.optimizer).__name__.lower()


def test_document_ids_are_documents_of_doc_len_tokens():
    batch = {"input_ids": torch.zeros(2, 10, dtype=torch.long)}
    ids = options_cost.with_documents(batch, 4)["document_ids"]  # (B, T)
    assert ids.tolist() == [[0, 0, 0, 0, 1, 1, 1, 1, 2, 2]] * 2


def test_rows_are_medians_divided_by_the_first_arm():
    arms = _build(["baseline", "model.norm_type=rmsnorm"])
    seconds = options_cost.time_arms(arms, rounds=3, steps=1, device=CPU)
    assert {k: len(v) for k, v in seconds.items()} == {"baseline": 3, "model.norm_type=rmsnorm": 3}
    rows = options_cost.rows_of({"baseline": [1.0, 3.0, 2.0], "model.norm_type=rmsnorm": [4.0, 5.0, 6.0]}, arms, 32)
    assert [r["ratio"] for r in rows] == [1.0, 0.4]
    assert [r["tokens_per_s"] for r in rows] == [16.0, 6.4]
    assert rows[0]["spread"] == 1.0
    table = options_cost.markdown(rows)
    assert "| `model.norm_type=rmsnorm` | 0.40 × | 6 | 40% |" in table


@pytest.mark.parametrize(
    "overrides, words",
    [
        (["trainer.max_steps=3"], "model.*, task.*, optim.*"),
        (["model.no_such_key=1"], "no_such_key"),
        (["model.norm_type=nosuch"], "nosuch"),
    ],
)
def test_a_bad_arm_is_refused_before_anything_is_built(overrides, words):
    with pytest.raises(ConfigError, match=words.replace("*", r"\*").replace(".", r"\.")):
        options_cost.build_arms(
            ["bad"], shape=TINY, batch=2, seq_len=16, doc_len=4, device=CPU, arms={"bad": overrides}
        )
    with pytest.raises(ConfigError, match="unknown arm 'nosuch'"):
        _build(["baseline", "nosuch"])


def test_memory_counts_what_backward_keeps_and_the_parameters():
    """The saved bytes grow with the tokens of a step (activations, not weights); the parameter
    bytes are the model's; the rows divide both by the first arm's."""
    short, long = (
        options_cost.build_arms(["baseline"], shape=TINY, batch=2, seq_len=T, doc_len=4, device=CPU)[0]
        for T in (16, 32)
    )
    a, b = options_cost.memory_of(short), options_cost.memory_of(long)
    assert 0 < a["saved_bytes"] < b["saved_bytes"]
    assert a["param_bytes"] == b["param_bytes"] == 4 * sum(p.numel() for p in short.subject.model.parameters())
    arms = _build(["baseline", "model.activation=relu2"])
    memory = {arm.name: options_cost.memory_of(arm) for arm in arms}
    rows = options_cost.rows_of({"baseline": [1.0], "model.activation=relu2": [1.0]}, arms, 32, memory)
    assert rows[0]["saved_ratio"] == 1.0 and rows[1]["saved_ratio"] > 0
    assert "saved for backward vs baseline" in options_cost.markdown(rows)
