"""`zoo-generate` and `zoo-eval` as a user runs them, on checkpoints trained here: the
number-phrase recipe (shortened) translates held-out phrases, and bad input fails cleanly."""

from __future__ import annotations

import json

import pytest

import zoo
from tests.cli.conftest import tiny_overrides
from tests.forked import fork_tool as tool  # zoo-NAME as a process of its own, forked from this one
from zoo import train
from zoo.config.schema.data import as_data_config
from zoo.data.corpora.numbers import english, spanish
from zoo.data.sources import load_splits


def one_line_failure(result, *fragments):
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    (line,) = [ln for ln in result.stderr.splitlines() if ": error: " in ln]
    for fragment in fragments:
        assert fragment in line, (fragment, line)


@pytest.fixture(scope="module")
def numbers(tmp_path_factory):
    """The numbers_seq2seq recipe cut to 300 steps and a feed-forward width of 256 (97% exact match
    on the 500 held-out phrases, BLEU 0.995; 250 steps give 86%; the recipe's 512 at 420 steps
    gave 99% for 1.6 times the CPU time); its own validation reads one batch (zoo-eval reads
    them all)."""
    run = tmp_path_factory.mktemp("numbers")
    cfg = zoo.compose(
        [
            "trainer.max_steps=300",
            "trainer.val_check_interval=300",
            "trainer.limit_val_batches=1",
            "model.d_ff=256",
            "callbacks.progress_bar=none",
        ],
        config_name="numbers_seq2seq",
    )
    train(cfg, run)
    held_out = load_splits(as_data_config(cfg.data))["validation"]["n"]
    return run / "checkpoints" / "last.ckpt", sorted(held_out)


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    run = tmp_path_factory.mktemp("lm")
    overrides = [o for o in tiny_overrides(run) if not o.startswith("hydra.")] + ["tokenizer=char"]
    train(zoo.compose(overrides), run)
    return run / "checkpoints" / "last.ckpt"


@pytest.mark.slow
def test_zoo_generate_translates_held_out_phrases(numbers, tmp_path, cli_here):
    ckpt, held_out = numbers
    sample = held_out[:: max(1, len(held_out) // 40)][:40]
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(english(n) for n in sample) + "\n")
    result = tool("generate", f"ckpt={ckpt}", f"prompts={prompts}")
    assert result.returncode == 0, result.stderr[-2000:]
    outputs = result.stdout.strip().splitlines()
    assert len(outputs) == len(sample)
    exact = sum(out == spanish(n) for out, n in zip(outputs, sample)) / len(sample)
    assert exact >= 0.9, list(zip(outputs, map(spanish, sample)))[:5]
    beam = cli_here("generate", f"ckpt={ckpt}", f"prompt={english(sample[0])}", "strategy=beam", "num_beams=3")
    assert beam.stdout.strip() == spanish(sample[0])


@pytest.mark.slow
def test_zoo_eval_reports_bleu_and_exact_match(numbers, tmp_path, cli_here):
    """In this process: zoo-eval as its own process is run by the two-process test below."""
    ckpt, held_out = numbers
    out = tmp_path / "metrics.json"
    result = cli_here("eval", f"ckpt={ckpt}", f"out={out}")
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["examples_evaluated"] == report["split_examples"] == len(held_out)
    assert report["split"] == "validation" and report["limit_batches"] is None
    metrics = report["metrics"]
    assert metrics["exact_match"] >= 0.9 and metrics["bleu"] >= 0.9
    assert metrics["loss"] > 0 and metrics["ppl"] >= 1.0
    # a file of the user's own, evaluated whole
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(json.dumps({"source": english(n), "target": spanish(n)}) for n in held_out[:30]))
    own = cli_here("eval", f"ckpt={ckpt}", f"data={pairs}")
    assert own.returncode == 0, own.stderr[-2000:]
    assert json.loads(own.stdout)["examples_evaluated"] == 30


@pytest.mark.slow
def test_zoo_generate_continues_a_prompt_and_eval_scores_an_lm(tiny_lm, tmp_path, cli_here):
    """The first call as a user runs it, in a process of its own; the others in this process."""
    result = tool("generate", f"ckpt={tiny_lm}", "prompt=And God said", "max_new_tokens=10")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("And God said")
    pictures = cli_here(
        "generate",
        f"ckpt={tiny_lm}",
        "prompt=And",
        "max_new_tokens=4",
        f"attention_map={tmp_path / 'attn.png'}",
        "layers=0",
        "heads=0,1",
        f"positions_plot={tmp_path / 'pos.png'}",
    )
    assert pictures.returncode == 0, pictures.stderr[-2000:]
    for name in ("attn.png", "pos.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    report = cli_here("eval", f"ckpt={tiny_lm}", "data.seq_len=16", "limit_batches=2")
    assert report.returncode == 0, report.stderr[-2000:]
    metrics = json.loads(report.stdout)["metrics"]
    assert set(metrics) >= {"loss", "ppl", "accuracy"} and json.loads(report.stdout)["seq_len"] == 16
    # what limit_batches evaluated, beside the whole split, each under its own name
    counts = json.loads(report.stdout)
    assert counts["limit_batches"] == 2 and counts["batches_evaluated"] == 2
    assert counts["examples_evaluated"] == 2 * 32 < counts["split_examples"]
    assert counts["tokens_evaluated"] == counts["examples_evaluated"] * 16


@pytest.mark.slow
def test_zoo_eval_names_the_validation_tokens_beside_the_summary(tiny_lm, cli_here):
    """The run's val/loss comes from trainer.limit_val_batches batches, zoo-eval's from the
    whole split: both counts are recorded, and zoo-eval prints the two figures side by side."""
    run_dir = tiny_lm.parent.parent
    summary = json.loads((run_dir / "summary.json").read_text())
    measured = summary["data"]["val_tokens_measured"]
    assert 0 < measured <= summary["data"]["val_tokens"]
    whole = cli_here("eval", f"ckpt={run_dir}")
    assert whole.returncode == 0, whole.stderr[-2000:]
    report = json.loads(whole.stdout)
    # every validation window's targets: the split's tokens less at most one window's remainder
    tokens = report["tokens_evaluated"]
    assert tokens >= measured and tokens > summary["data"]["val_tokens"] - 2 * report["seq_len"]
    line = [ln for ln in whole.stderr.splitlines() if "summary.json reports" in ln]
    assert len(line) == 1 and f"{tokens:,}" in line[0] and f"{measured:,}" in line[0], whole.stderr
    assert f"{summary['metrics']['val/loss']:.4f}" in line[0]


class Recorded:
    """A text stream that keeps each write apart."""

    def __init__(self):
        self.writes: list[str] = []

    def write(self, text: str) -> None:
        self.writes.append(text)

    def flush(self) -> None:
        pass


@pytest.mark.slow
def test_zoo_generate_streams_one_prompt_and_prints_the_same_line(tiny_lm, tmp_path, cli_here, capsys):
    from zoo.cli.generate import run

    # sampled (seeded): a barely trained model's greedy choice can be one piece over and over
    args = [f"ckpt={tiny_lm}", "prompt=And God said", "max_new_tokens=24", "strategy=sample", "seed=1"]
    streamed = Recorded()
    (line,) = run(args, out=streamed)
    assert "".join(streamed.writes) == line + "\n"
    assert len([w for w in streamed.writes if w]) > 5  # the prompt, then pieces as they come
    whole = Recorded()
    assert run([*args, "stream=false"], out=whole) == [line] and whole.writes == [line + "\n"]
    # several prompts in one batch are written batch by batch; beam at its end; progress=true
    # gives the totals on stderr
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("And God said\nIn the beginning\n")
    both = cli_here("generate", f"ckpt={tiny_lm}", f"prompts={prompts}", "max_new_tokens=8", "progress=true")
    assert both.returncode == 0, both.stderr[-2000:]
    assert both.stdout.splitlines()[0] == run([f"ckpt={tiny_lm}", "prompt=And God said", "max_new_tokens=8"])[0]
    (total,) = [ln for ln in both.stderr.splitlines() if "tokens/s" in ln]
    assert total.startswith("zoo-generate: 16 tokens in "), both.stderr
    beam = Recorded()
    assert run([*args[:3], "strategy=beam", "num_beams=2"], out=beam)[0] + "\n" == "".join(beam.writes)
    assert len(beam.writes) == 1


def test_attention_map_indices_are_refused_before_anything_is_decoded(tiny_lm, tmp_path, cli_here):
    """A layer or head the model lacks is refused before decoding: nothing on stdout (the
    continuation was written, then the picture refused), no picture."""
    for option, words in (
        ("layers=9", "layer 9 does not exist; the model has layers 0..0"),
        ("heads=2", "head 2 does not exist; the model has heads 0..1"),
    ):
        picture = tmp_path / "a.png"
        result = cli_here(
            "generate", f"ckpt={tiny_lm}", "prompt=And", "max_new_tokens=4", f"attention_map={picture}", option
        )
        assert result.returncode == 2 and result.stdout == "" and not picture.exists()
        assert result.stderr.strip().splitlines() == [f"zoo-generate: error: {words}"]


@pytest.mark.slow
def test_bad_input_fails_with_one_line(tiny_lm, tmp_path, cli_here):
    tool = cli_here  # the refusals in this process: no interpreter start-up each

    one_line_failure(tool("generate", f"ckpt={tiny_lm}", "prompt=And God said ☃"), "☃")
    one_line_failure(tool("generate", f"ckpt={tiny_lm}", "prompt="), "empty")
    one_line_failure(tool("generate", f"ckpt={tiny_lm}", "prompt=And", "max_new_tokens=100"), "100", "max_seq_len=64")
    one_line_failure(tool("generate", f"ckpt={tmp_path / 'missing.ckpt'}", "prompt=x"), "missing.ckpt")
    one_line_failure(tool("generate", f"ckpt={tiny_lm}", "prompt=x", "beams=2"), "beams", "allowed keys")
    one_line_failure(tool("eval", f"ckpt={tiny_lm}", "split=test"), "split", "validation, train")
    one_line_failure(
        tool(
            "generate",
            f"ckpt={tiny_lm}",
            "prompt=And",
            "max_new_tokens=4",
            f"attention_map={tmp_path / 'a.png'}",
            "layers=9",
        ),
        "layer 9",
    )
    one_line_failure(tool("eval", f"ckpt={tiny_lm}", f"data={tmp_path / 'none.txt'}"), "none.txt")
    bert = tmp_path / "bert"
    train(
        zoo.compose(
            [
                "model=bert",
                *[o for o in tiny_overrides(bert) if not o.startswith("hydra.")],
                "trainer.max_steps=3",
                "trainer.val_check_interval=3",
            ]
        ),
        bert,
    )
    one_line_failure(
        tool("generate", f"ckpt={bert / 'checkpoints' / 'last.ckpt'}", "prompt=x"), "masked_lm", "causal_lm or seq2seq"
    )


@pytest.mark.slow
def test_zoo_eval_on_two_processes_reports_once(tiny_lm, tmp_path, cli_here):
    """Two CPU ranks (gloo): each evaluates its shard, torchmetrics reduces, rank 0 reports."""
    out = tmp_path / "eval.json"
    result = tool("eval", f"ckpt={tiny_lm}", "devices=2", f"out={out}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count('"checkpoint"') == 1
    two = json.loads(out.read_text())["metrics"]
    one = json.loads(cli_here("eval", f"ckpt={tiny_lm}").stdout)["metrics"]
    # the distributed sampler repeats an example to even out the shards: nearly equal
    assert abs(two["loss"] - one["loss"]) < 0.05 and two["loss"] > 0


def test_zoo_eval_of_a_run_on_streamed_local_files(tmp_path, cli_here):
    """docs/generating.md's `zoo-eval ckpt=... data.source=pydoc ...` on a run trained on
    streamed local files: the checkpoint's data.path and data.streaming belong to its own
    source and are left behind (they were refused as keys pydoc does not take); a source the
    override does not change keeps them. split=train of a stream is refused on one line."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i}: {'abc ' * (i % 9)}\n" for i in range(400)))
    run = tmp_path / "run"
    overrides = [o for o in tiny_overrides(run) if not o.startswith(("hydra.", "data.max_examples"))]
    overrides += ["data=local", f"data.path={corpus}", "data.streaming=true", "data.val_documents=50"]
    train(zoo.compose(overrides), run)
    ckpt = run / "checkpoints" / "last.ckpt"
    other = cli_here("eval", f"ckpt={ckpt}", "data.source=pydoc", "data.seq_len=16", "limit_batches=2")
    assert other.returncode == 0, other.stderr[-2000:]
    assert json.loads(other.stdout)["batches_evaluated"] == 2
    same = cli_here("eval", f"ckpt={ckpt}", "data.source=local", "data.seq_len=16", "limit_batches=1")
    assert same.returncode == 0, same.stderr[-2000:]
    # a stream has no training split of known size: one line, not len()'s traceback
    train_split = cli_here("eval", f"ckpt={ckpt}", "split=train", "limit_batches=1")
    assert train_split.returncode == 2 and "Traceback" not in train_split.stderr
    assert (
        train_split.stderr.strip()
        .splitlines()[-1]
        .startswith("zoo-eval: error: split=train: the data is streamed (data.streaming=true)")
    )
    prepared = cli_here("eval", f"ckpt={ckpt}", "split=train", "data.streaming=false", "limit_batches=1")
    assert prepared.returncode == 0, prepared.stderr[-2000:]
    # a window past the learned positions names the key the command gave it with
    long = cli_here("eval", f"ckpt={ckpt}", "data.seq_len=100")
    assert long.returncode == 2 and long.stderr.strip().splitlines() == [
        "zoo-eval: error: data.seq_len=100 is past the model's learned positions (model.max_seq_len=64): "
        "give seq_len=64 or less"
    ]
    hub = cli_here("eval", f"ckpt={ckpt}", "data.source=hub", "limit_batches=1")
    assert hub.returncode == 2 and hub.stderr.strip().splitlines() == [
        "zoo-eval: error: data.source=hub needs data.hub_name (a Hugging Face dataset name)"
    ]
