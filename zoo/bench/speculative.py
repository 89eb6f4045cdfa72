"""zoo-bench ckpt=PATH: greedy decoding of a checkpoint trained with task.mtp_depth, plain
(`zoo.models.generate`) and self-speculative (`zoo.models.speculative`), on the same prompts, in
interleaved rounds: tokens per second of each (medians), the share of drafts accepted (by
depth), new tokens per model forward, and whether the two outputs are identical (they must be)."""

from __future__ import annotations

from pathlib import Path

import torch

from zoo.bench.options import SpeculativeOptions
from zoo.bench.timing import interleaved, median, spread, timed
from zoo.config.errors import ConfigError
from zoo.models.generate import generate
from zoo.models.limits import check_lengths
from zoo.models.speculative import SpeculativeStats, check_speculative, speculative_generate
from zoo.training.checkpoint.files import load_checkpoint

# the quick recipe's corpus is the King James Bible: prompts from it let a small model draft well
DEFAULT_PROMPTS = (
    "In the beginning God created",
    "And God said, Let there be",
    "And the earth was without form",
    "And God saw the light",
    "And the evening and the morning",
    "And God called the firmament",
    "Let the waters under the heaven",
    "And the LORD God formed man",
)


def read_prompts(opts: SpeculativeOptions) -> list[str]:
    if opts.prompts is None:
        return list(DEFAULT_PROMPTS)
    path = Path(opts.prompts)
    if not path.is_file():
        raise ConfigError(f"prompts={opts.prompts}: no such file")
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        raise ConfigError(f"prompts={opts.prompts} holds no prompt")
    return lines


def run_speculative(opts: SpeculativeOptions, ckpt: Path, log=print) -> dict:
    """The figures of one checkpoint (see the module docstring), measured on `opts.threads`
    threads; the process's thread count is put back after (a caller's later runs keep theirs)."""
    before = torch.get_num_threads()
    try:
        return _run_speculative(opts, ckpt, log)
    finally:
        torch.set_num_threads(before)


def _run_speculative(opts: SpeculativeOptions, ckpt: Path, log) -> dict:
    if opts.threads:
        torch.set_num_threads(opts.threads)
    task = load_checkpoint(ckpt)
    mtp, tokenizer = getattr(task, "mtp", None), task.tokenizer
    try:
        check_speculative(task.model, mtp)
    except ValueError as exc:
        raise ConfigError(f"ckpt={opts.ckpt}: {exc}") from None
    assert mtp is not None and tokenizer is not None  # checked; a trained run keeps its tokenizer
    task.eval()
    texts = read_prompts(opts)
    prompts = [torch.tensor([tokenizer.encode(text)]) for text in texts]
    for ids in prompts:
        check_lengths(task.model_config, ids.shape[1], opts.new_tokens)
    limit = tokenizer.vocab_size
    device = torch.device("cpu")
    outputs: dict[str, list[torch.Tensor]] = {"plain": [], "speculative": []}
    stats = SpeculativeStats()

    def plain() -> None:
        outputs["plain"] = [
            generate(task.model, ids, max_new_tokens=opts.new_tokens, vocab_limit=limit) for ids in prompts
        ]

    def speculative() -> None:
        outputs["speculative"], stats_now = [], SpeculativeStats()
        for ids in prompts:
            out, row = speculative_generate(task.model, mtp, ids, max_new_tokens=opts.new_tokens, vocab_limit=limit)
            outputs["speculative"].append(out)
            stats_now.add(row)
        stats.__dict__.update(stats_now.__dict__)

    units = len(prompts) * opts.new_tokens
    log(
        f"greedy decoding, plain and speculative: {len(prompts)} prompts x {opts.new_tokens} tokens x {opts.rounds} rounds"
    )
    seconds = interleaved(
        {"plain": lambda: timed(plain, units, device), "speculative": lambda: timed(speculative, units, device)},
        rounds=opts.rounds,
    )
    identical = all(torch.equal(a, b) for a, b in zip(outputs["plain"], outputs["speculative"]))
    plain_tps, spec_tps = 1 / median(seconds["plain"]), 1 / median(seconds["speculative"])
    return {
        "checkpoint": Path(opts.ckpt or ckpt).name,
        "mtp_depth": mtp.depth,
        "prompts": len(prompts),
        "new_tokens": opts.new_tokens,
        "threads": torch.get_num_threads(),
        "plain_tokens_per_s": plain_tps,
        "speculative_tokens_per_s": spec_tps,
        "speedup": spec_tps / plain_tps,
        "acceptance": stats.acceptance,
        "acceptance_by_depth": stats.acceptance_by_depth,
        "tokens_per_forward": stats.tokens_per_forward,
        "identical": identical,
        "spread": {name: spread(values) for name, values in seconds.items()},
    }


def markdown(result: dict) -> str:
    """The figures as a Markdown table."""
    by_depth = ", ".join(f"{a:.2f}" for a in result["acceptance_by_depth"])
    rows = [
        ("greedy tokens/s, plain", f"{result['plain_tokens_per_s']:,.0f}"),
        ("greedy tokens/s, speculative", f"{result['speculative_tokens_per_s']:,.0f}"),
        ("speedup", f"{result['speedup']:.2f}x"),
        ("drafts accepted", f"{result['acceptance']:.1%}"),
        ("drafts accepted, by depth", by_depth),
        ("new tokens per model forward", f"{result['tokens_per_forward']:.2f}"),
        ("outputs identical", "yes" if result["identical"] else "NO"),
    ]
    head = (
        f"{result['prompts']} prompts x {result['new_tokens']} new tokens, task.mtp_depth={result['mtp_depth']}, "
        f"{result['threads']} threads\n\n| | |\n|---|---|\n"
    )
    return head + "\n".join(f"| {name} | {value} |" for name, value in rows) + "\n"
