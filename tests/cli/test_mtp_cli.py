"""Multi-token prediction through the tools: zoo-train with task.mtp_depth logs each depth's
loss and checkpoints the modules, resumes them bit for bit; zoo-generate speculative=true prints
what plain greedy prints; zoo-export drops the modules or keeps them; the refusals are one line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch
import yaml

import zoo
from tests.cli.conftest import missed, tiny_overrides
from tests.forked import fork_tool
from tests.training.checkpoint.kill_after_save import install
from zoo import train
from zoo.config.schema.convert import as_model_config
from zoo.config.schema.flops import mtp_flops
from zoo.training.checkpoint.files import read_checkpoint

PROMPTS = ("And God said", "In the beginning", "the")


def _train(run: Path, *extra: str) -> Path:
    overrides = [o for o in tiny_overrides(run) if not o.startswith("hydra.")] + ["tokenizer=char", *extra]
    outcome = train(zoo.compose(overrides), run)
    assert outcome.summary is not None, outcome.failure
    return run / "checkpoints" / "last.ckpt"


@pytest.fixture(scope="module")
def mtp_lm(tmp_path_factory) -> Path:
    return _train(tmp_path_factory.mktemp("mtp"), "task.mtp_depth=2")


def test_each_depth_is_logged_apart_and_the_checkpoint_keeps_the_modules(mtp_lm):
    rows = [r for r in csv.DictReader((mtp_lm.parent.parent / "metrics.csv").open()) if r.get("train/loss")]
    assert rows and all(float(r["train/mtp_loss_1"]) > 0 and float(r["train/mtp_loss_2"]) > 0 for r in rows)
    state = read_checkpoint(mtp_lm)["state_dict"]
    assert {k.split(".")[2] for k in state if k.startswith("mtp.layers.")} == {"0", "1"}


def test_the_summary_counts_the_modules_in_the_training_flops(mtp_lm):
    run = mtp_lm.parent.parent
    summary, config = json.loads((run / "summary.json").read_text()), yaml.safe_load((run / "config.yaml").read_text())
    modules = mtp_flops(as_model_config(config["model"]), 2, config["data"]["seq_len"])
    assert modules > 0 and summary["train_flops_per_token"] == summary["model"]["flops_per_token"] + modules


def test_speculative_decoding_prints_what_plain_greedy_prints(mtp_lm, cli_here):
    for prompt in PROMPTS:
        plain = cli_here("generate", f"ckpt={mtp_lm}", f"prompt={prompt}", "max_new_tokens=24")
        fast = cli_here("generate", f"ckpt={mtp_lm}", f"prompt={prompt}", "max_new_tokens=24", "speculative=true")
        assert plain.returncode == fast.returncode == 0, fast.stderr[-2000:]
        assert fast.stdout == plain.stdout and fast.stdout.startswith(prompt)


def test_speculative_options_of_another_strategy_are_refused_on_one_line(mtp_lm, cli_here):
    result = cli_here("generate", f"ckpt={mtp_lm}", "prompt=a", "speculative=true", "strategy=beam")
    assert not missed(result, "generate", "speculative=true verifies greedy choices; it needs strategy=greedy")
    result = cli_here("generate", f"ckpt={mtp_lm}", "prompt=a", "speculative=true", "static_cache=true")
    assert not missed(result, "generate", "it takes static_cache=false")


def test_export_drops_the_modules_by_default_and_keeps_them_when_asked(mtp_lm, tmp_path, cli_here):
    from transformers import AutoModelForCausalLM

    from zoo.interop.hf.mtp import MTP_FILE, load_mtp
    from zoo.models.mtp import MultiTokenPrediction
    from zoo.training.checkpoint.files import load_checkpoint

    dropped = cli_here("export", f"ckpt={mtp_lm}", f"out={tmp_path / 'dropped'}")
    assert dropped.returncode == 0, dropped.stderr[-2000:]
    assert json.loads(dropped.stdout)["mtp"].startswith("dropped: 2 module(s)")
    assert not (tmp_path / "dropped" / MTP_FILE).exists()
    kept = cli_here("export", f"ckpt={mtp_lm}", f"out={tmp_path / 'kept'}", "mtp=keep")
    assert kept.returncode == 0, kept.stderr[-2000:]
    task = load_checkpoint(mtp_lm)
    again = MultiTokenPrediction(task.model_config, 2)
    load_mtp(tmp_path / "kept", again)
    assert all(torch.equal(a, b) for a, b in zip(task.mtp.state_dict().values(), again.state_dict().values()))
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "kept").eval()
    assert hf.config.num_nextn_predict_layers == 2
    ids = torch.randint(0, 60, (1, 12))
    with torch.no_grad():
        assert torch.allclose(hf(ids).logits, task.model(ids).logits, atol=1e-4)


def test_zoo_bench_reports_acceptance_and_tokens_per_second_beside_plain_greedy(mtp_lm, tmp_path, cli_here):
    threads = torch.get_num_threads()
    result = cli_here("bench", f"ckpt={mtp_lm}", "new_tokens=8", "rounds=1", f"out={tmp_path / 'spec.json'}")
    assert torch.get_num_threads() == threads  # put back: later runs in this process keep theirs
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads((tmp_path / "spec.json").read_text())
    assert figures["identical"] is True and figures["mtp_depth"] == 2 and figures["prompts"] == 8
    assert 0.0 <= figures["acceptance"] <= 1.0 and len(figures["acceptance_by_depth"]) == 2
    assert figures["plain_tokens_per_s"] > 0 and figures["speculative_tokens_per_s"] > 0
    assert 1.0 <= figures["tokens_per_forward"] <= 3.0  # at most the depth's drafts and one more a forward
    assert "| drafts accepted |" in result.stdout
    assert (tmp_path / "spec.md").read_text().startswith(f"`zoo-bench ckpt={mtp_lm} new_tokens=8 rounds=1`")
    refused = cli_here("bench", f"ckpt={mtp_lm}", "model.d_model=64")
    assert not missed(refused, "bench", "'model.d_model=64': zoo-bench ckpt=PATH takes")


def test_a_checkpoint_without_modules_is_refused_on_one_line(tmp_path, cli_here):
    plain = _train(tmp_path / "plain", "trainer.max_steps=3", "callbacks.checkpoint_every_n_steps=3")
    result = cli_here("generate", f"ckpt={plain}", "prompt=a", "speculative=true")
    assert not missed(result, "generate", "drafts with multi-token prediction modules; train with task.mtp_depth")
    result = cli_here("bench", f"ckpt={plain}", "rounds=1")
    assert not missed(result, "bench", "drafts with multi-token prediction modules")
    result = cli_here("export", f"ckpt={plain}", f"out={tmp_path / 'out'}", "mtp=keep")
    assert not missed(result, "export", "has no multi-token prediction modules (task.mtp_depth=0)")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_task_without_modules_is_refused_by_zoo_train_on_one_line(cli_here, tmp_path):
    result = cli_here("train", *tiny_overrides(tmp_path), "model=bert", "task.mtp_depth=1")
    assert not missed(result, "train", "task.mtp_depth=1", "not task=masked_lm")


@pytest.mark.slow
def test_a_run_with_the_modules_resumes_bit_for_bit(tmp_path, cli_here):
    args = ["trainer.max_steps=4", "callbacks.checkpoint_every_n_steps=2", "trainer.val_check_interval=4"]
    args += ["data.max_examples=40", "task.mtp_depth=2"]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    done = cli_here("train", *tiny_overrides(straight), *args)
    assert done.returncode == 0, done.stderr[-3000:]
    stopped = fork_tool(
        "train", *tiny_overrides(killed), *args, before=lambda: install(2, "last.ckpt", "on_train_batch_end")
    )
    assert stopped.returncode == -9, stopped.stderr[-3000:]
    again = cli_here("train", *tiny_overrides(killed), *args)
    assert again.returncode == 0, again.stderr[-3000:]
    a = read_checkpoint(straight / "checkpoints" / "last.ckpt")["state_dict"]
    b = read_checkpoint(killed / "checkpoints" / "last.ckpt")["state_dict"]
    assert a.keys() == b.keys() and any(k.startswith("mtp.") for k in a)
    assert all(torch.equal(a[k], b[k]) for k in a)
