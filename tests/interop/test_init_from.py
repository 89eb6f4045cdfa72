"""`zoo-train init_from=hf:DIR`: fine-tuning starts from a Hugging Face model directory.

Tiny random models are saved with `save_pretrained` beside a BPE tokenizer trained here (no
downloads). The model zoo-train builds and loads gives the HF model's logits; a real CLI run
starts at the HF model's loss, keeps DIR's tokenizer in its run directory, and on resume takes
the checkpoint's weights instead of DIR's; contradicting overrides are refused on one line."""

from __future__ import annotations

import json
import logging
import math
import shutil
import sys

import pytest
import torch
import torch.nn.functional as F
import transformers  # a test dependency: missing, these tests fail rather than skip
import yaml

import zoo  # noqa: E402
from tests.interop.tiny_hf import MODELS, save_model  # noqa: E402
from zoo.cli.refusals import refusal  # noqa: E402
from zoo.config.facts.tasks import task_of_family  # noqa: E402
from zoo.config.schema.convert import plain  # noqa: E402
from zoo.config.schema.validate import validate  # noqa: E402
from zoo.data import build_datamodule, load_tokenizer  # noqa: E402
from zoo.interop.hf.pretrained import load_weights, model_config, supported  # noqa: E402
from zoo.tasks import TASKS  # noqa: E402
from zoo.training.parts import init_weights  # noqa: E402

TEXT = "And God said, Let there be light: and there was light."


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    """(directory, transformers model, transformers tokenizer)."""
    directory = tmp_path_factory.mktemp("llama")
    return (directory, *save_model(directory, "llama"))


def _task(cfg, **extra):
    """The task zoo-train builds from a composed config (before init_from's weights)."""
    spec = validate(cfg)
    return TASKS[spec.task.kind](model=spec.model.to_dict(), task=plain(spec.task), extra=extra), spec


@pytest.mark.parametrize("family", sorted(MODELS))
def test_the_model_zoo_train_loads_gives_the_hf_logits(family, tmp_path):
    assert family in supported()
    hf_model, hf_tokenizer = save_model(tmp_path, family)
    task = task_of_family(model_config(tmp_path).family)  # the default task of the weights' family
    cfg = zoo.compose([f"init_from=hf:{tmp_path}", f"task={task.value}"])
    assert cfg.tokenizer.kind == "hf" and cfg.tokenizer.path == str(tmp_path)
    assert cfg.model.vocab_size == len(hf_tokenizer)
    task, spec = _task(cfg)
    init_weights(task, spec.init_from)
    ids = torch.tensor([hf_tokenizer.encode(TEXT, add_special_tokens=False)[:12]] * 2)  # (2, 12)
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0  # right padding
    inputs = {"input_ids": ids}
    if spec.model.family.value != "decoder_only":
        inputs["attention_mask"] = mask
    if spec.model.family.value == "encoder_decoder":
        inputs["decoder_input_ids"] = ids[:, :7]
    task.model.eval()
    with torch.no_grad():
        expected, got = hf_model(**inputs).logits, task.model(**inputs).logits
    keep = (mask[:, :7] if "decoder_input_ids" in inputs else mask).bool()
    assert got.shape == expected.shape
    assert float((got[keep] - expected[keep]).abs().max()) <= 1e-4


def test_only_dropout_stays_from_the_composed_model(llama_dir):
    directory, hf_model, _ = llama_dir
    cfg = zoo.compose([f"init_from=hf:{directory}", "model.dropout=0.1"])
    config = hf_model.config
    assert cfg.model.dropout == 0.1
    assert (cfg.model.d_model, cfg.model.n_layers, cfg.model.n_heads, cfg.model.n_kv_heads, cfg.model.d_ff) == (
        config.hidden_size,
        config.num_hidden_layers,
        config.num_attention_heads,
        config.num_key_value_heads,
        config.intermediate_size,
    )
    assert cfg.model.position.kind == "rope" and cfg.model.norm_type == "rmsnorm"
    again = zoo.interop.hf.init_from.apply_init_from(cfg)  # applying twice changes nothing
    assert again.model == cfg.model and again.tokenizer == cfg.tokenizer


def test_a_rope_scaling_rule_from_the_command_line_fine_tunes_past_the_pretrained_length(llama_dir):
    """RoPE's context-extension rule is kept from the command line (the weights fit any rule);
    the model built is the pretrained one under YaRN, whose logits past the length differ."""
    directory = llama_dir[0]
    rule = ["model.position.scaling=yarn", "model.position.scale=4", "model.position.original_max_seq_len=8"]
    cfg = zoo.compose([f"init_from=hf:{directory}", *rule])
    assert (cfg.model.position.scaling, cfg.model.position.scale, cfg.model.position.original_max_seq_len) == (
        "yarn",
        4.0,
        8,
    )
    plain = zoo.compose([f"init_from=hf:{directory}"])
    assert {k: v for k, v in cfg.model.items() if k != "position"} == {
        k: v for k, v in plain.model.items() if k != "position"
    }
    tasks = []
    for composed in (plain, cfg):
        task, spec = _task(composed)
        init_weights(task, spec.init_from)
        tasks.append(task.model.eval())
    ids = torch.randint(0, plain.model.vocab_size, (1, 24))
    with torch.no_grad():
        assert not torch.allclose(tasks[0](ids).logits, tasks[1](ids).logits, atol=1e-4)
    message = refusal([f"init_from=hf:{directory}", "model.position.theta=5"])
    assert message.startswith(f"model.position.theta=5: init_from=hf:{directory} fixes the architecture"), message


def test_a_classifier_keeps_its_fresh_head(llama_dir, caplog):
    directory, hf_model, _ = llama_dir
    task, spec = _task(zoo.compose([f"init_from=hf:{directory}", "task=classification"]), labels=["a", "b"])
    head = task.head.weight.detach().clone()
    with caplog.at_level(logging.INFO, logger="zoo"):
        init_weights(task, spec.init_from)
    assert torch.equal(task.head.weight, head)
    assert any(
        "not loaded (lm_head.weight)" in r.getMessage() and "freshly initialised" in r.getMessage()
        for r in caplog.records
    )
    ids = torch.arange(5, 25)[None]  # (1, 20)
    with torch.no_grad():
        expected = hf_model.model(input_ids=ids).last_hidden_state
        got = task.model(ids, return_logits=False).hidden_states
    assert float((got - expected).abs().max()) <= 1e-4
    assert "lm_head.weight" in load_weights(task.model, directory)


def _hf_val_loss(model, batches) -> float:
    """Token-weighted mean cross-entropy, as zoo's val/loss."""
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            logits = model(input_ids=batch["input_ids"]).logits  # (B, T, V)
            total += float(F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), reduction="sum"))
            count += batch["labels"].numel()
    return total / count


RUN = [
    "data=pydoc",
    "data.seq_len=32",
    "data.global_batch_size=4",
    "data.max_examples=40",
    "trainer.val_check_interval=2",
    "trainer.limit_val_batches=2",
    "trainer.log_every_n_steps=1",
    "callbacks.progress_bar=none",
    "scheduler.warmup_steps=1",
    "optim.lr=1e-9",
]  # the weights stay DIR's: val/loss is then the HF model's loss


@pytest.mark.slow
def test_zoo_train_fine_tunes_from_the_directory_and_resume_keeps_the_checkpoint(llama_dir, tmp_path, cli_here):
    """zoo-train and zoo-export as their main() in this process (a process of their own changes
    nothing the test reads)."""
    directory = tmp_path / "llama"
    shutil.copytree(llama_dir[0], directory)
    _, hf_model, hf_tokenizer = llama_dir
    run = tmp_path / "run"
    first = cli_here("train", f"init_from=hf:{directory}", *RUN, "trainer.max_steps=2", f"hydra.run.dir={run}")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "init_from: the model starts from the weights in" in (run / "train.log").read_text()

    tokenizer = load_tokenizer(run / "tokenizer")  # the run directory's own copy of DIR's tokenizer
    assert tokenizer.kind == "hf" and tokenizer.vocab_size == hf_model.config.vocab_size
    assert tokenizer.special_ids()["eos"] == hf_tokenizer.eos_token_id == 317
    assert tokenizer.encode(TEXT) == hf_tokenizer.encode(TEXT, add_special_tokens=False)

    # val/loss after two steps at lr 1e-9 (every weight moved by at most ~2e-9) is the HF model's
    # loss on the same validation batches, up to float32 summation order (~1e-6); a model
    # initialised by zoo is ~0.2 away from it
    summary = json.loads((run / "summary.json").read_text())
    assert summary["init_from"] == f"hf:{directory}" and summary["global_step"] == 2
    data = yaml.safe_load((run / "config.yaml").read_text())["data"]
    dm = build_datamodule(data, tokenizer, "causal_lm", batch_size=4)
    dm.setup("fit")
    batches = [b for _, b in zip(range(2), dm.val_dataloader())]
    expected = _hf_val_loss(hf_model, batches)
    assert abs(summary["metrics"]["val/loss"] - expected) <= 1e-4, (summary["metrics"]["val/loss"], expected)
    torch.manual_seed(0)
    fresh, _ = _task(zoo.compose([f"init_from=hf:{directory}"]))
    fresh_loss = _hf_val_loss(fresh.model.eval(), batches)
    assert abs(fresh_loss - expected) > 0.05 and abs(fresh_loss - math.log(tokenizer.vocab_size)) < 0.05

    # a resumed run takes the checkpoint's weights: DIR's weights file is not even read
    (directory / "model.safetensors").unlink()
    again = cli_here("train", f"init_from=hf:{directory}", *RUN, "trainer.max_steps=4", f"hydra.run.dir={run}")
    assert again.returncode == 0, again.stderr[-3000:]
    resumed = json.loads((run / "summary.json").read_text())
    assert resumed["resumed_from"].endswith("last.ckpt") and resumed["global_step"] == 4
    assert abs(resumed["metrics"]["val/loss"] - expected) <= 1e-4
    assert "whose weights win over" in (run / "train.log").read_text()

    # and back out: zoo-export writes a directory transformers loads with its own tokenizer
    out = tmp_path / "exported"
    exported = cli_here("export", f"ckpt={run}/checkpoints/last.ckpt", "format=hf", f"out={out}")
    assert exported.returncode == 0, exported.stderr[-3000:]
    back = transformers.AutoTokenizer.from_pretrained(out)
    assert back.encode(TEXT, add_special_tokens=False) == hf_tokenizer.encode(TEXT, add_special_tokens=False)
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    ids = torch.tensor([back.encode(TEXT, add_special_tokens=False)])
    with torch.no_grad():
        assert (reloaded(input_ids=ids).logits - hf_model(input_ids=ids).logits).abs().max() < 1e-3  # lr 1e-9


@pytest.mark.slow
def test_contradicting_or_bad_input_is_refused_on_one_line(llama_dir, tmp_path, monkeypatch):
    directory = llama_dir[0]
    init = f"init_from=hf:{directory}"
    assert refusal(["init_from=foo"]).startswith("init_from='foo' is not allowed; use init_from=hf:DIR")
    assert refusal([f"init_from=hf:{tmp_path / 'missing'}"]).endswith("missing: no such directory")
    tokenizer_only = tmp_path / "tokenizer-only"
    shutil.copytree(directory, tokenizer_only, ignore=shutil.ignore_patterns("config.json", "*.safetensors"))
    assert "no config.json there" in refusal([f"init_from=hf:{tokenizer_only}"])
    (tmp_path / "whisper").mkdir()
    (tmp_path / "whisper" / "config.json").write_text('{"model_type": "whisper"}')
    assert "model_type 'whisper' is not supported; supported: llama, gpt2" in refusal(
        [f"init_from=hf:{tmp_path / 'whisper'}"]
    )
    for override in ("model.d_model=64", "model=llama", "model/position=alibi", "++model.bias=true"):
        message = refusal([init, override])
        assert message.startswith(f"{override}: {init} fixes the architecture"), message
    for override in ("tokenizer=byte", "tokenizer.vocab_size=100"):
        message = refusal([init, override])
        assert message.startswith(f"{override}: the model's vocabulary belongs to the tokenizer of {init}")
    for ok in (["model.dropout=0.1"], ["tokenizer=hf"], [f"tokenizer.path={directory}"]):
        assert refusal([init, *ok]) is None, ok
    assert all("\n" not in refusal(o) for o in (["init_from=foo"], [init, "model=gpt"]))
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now fails
    assert refusal([init]).endswith(
        "needs transformers: install the hf extra, pip install '.[hf]' in zoo's source directory"
    )


@pytest.mark.parametrize(
    "args, words",
    [
        (["init_from=foo"], "init_from='foo' is not allowed"),
        (["model.n_layers=3"], "fixes the architecture"),
    ],
    ids=["no-prefix", "model-override"],
)
@pytest.mark.slow
def test_the_cli_refuses_before_writing_anything(llama_dir, tmp_path, args, words, cli_here):
    run = tmp_path / "run"
    init = [] if args[0].startswith("init_from") else [f"init_from=hf:{llama_dir[0]}"]
    result = cli_here("train", *init, *args, f"hydra.run.dir={run}")
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("zoo-train: error:") and words in lines[0], result.stderr
    assert not run.exists()


def test_windows_past_the_directory_positions_are_refused_with_a_fix_init_from_allows(tmp_path):
    """A GPT-2 directory's n_positions is its model.max_seq_len, which init_from fixes: the
    refusal asks for shorter windows, not for the model.max_seq_len it would then refuse."""
    save_model(tmp_path, "gpt2")
    init = f"init_from=hf:{tmp_path}"
    message = refusal([init, "data.seq_len=256"])
    assert message == (
        "data.seq_len (256) is longer than learned positions allow (model.max_seq_len=128): "
        f"give data.seq_len=128 or less ({init} fixes the architecture)"
    )
    assert refusal([init, "data.seq_len=128"]) is None
