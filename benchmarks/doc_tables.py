"""The documentation's tables of measured figures, written from the committed result files
(benchmarks/results/) rather than by hand.

    python benchmarks/doc_tables.py            # rewrite every generated table in docs/
    python benchmarks/doc_tables.py --check    # exit 1, naming each table that differs

Each table sits in its page between `<!-- table:NAME -->` and `<!-- /table:NAME -->`; TABLES
says which page and which function writes it. tests/test_doc_figures.py keeps every table equal
to what this script writes, and checks the figures quoted in the pages' prose against the same
files. No torch is imported.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs"
GPU_RUN = RESULTS / "gpu" / "2026-11-26-h100"


def load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def bench_table(result: dict) -> str:
    """zoo-bench's own Markdown table of a result (zoo.bench.report), without its preamble."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from zoo.bench.report import markdown

    lines = markdown(result).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| system |"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end]) + "\n"


def reference() -> str:
    """docs/performance.md: the reference shape on the 2-core CPU (`zoo-bench rounds=10`)."""
    return bench_table(load("reference.json"))


def gpu_train() -> str:
    """docs/performance.md: GPT-2 small on one H100, bf16 autocast, eager and compiled."""
    rows = json.loads((GPU_RUN / "train.json").read_text())["rows"]
    out = ["| system | eager tokens/s | compiled tokens/s | compiled MFU |", "|---|---|---|---|"]
    for name in dict.fromkeys(r["name"] for r in rows):
        eager = next(r for r in rows if r["name"] == name and r["variant"] == "bf16")
        compiled = next(r for r in rows if r["name"] == name and r["variant"] == "bf16-compile")
        out.append(
            f"| {name} | {eager['train_tokens_per_s']:,.0f} | {compiled['train_tokens_per_s']:,.0f} | "
            f"{compiled['mfu']:.0%} |"
        )
    return "\n".join(out) + "\n"


# launches.json's keys, as the table names them
LAUNCH_ROWS = [
    ("training_step", "zoo logits", "zoo, `output_loss=logits` (auto's choice on CUDA)"),
    ("training_step", "zoo chunked", "zoo, `output_loss=chunked` (16 chunks)"),
    ("training_step", "hf GPT2LMHeadModel", "hf GPT2LMHeadModel"),
    ("training_step", "x-transformers", "x-transformers"),
    ("training_step", "litgpt GPT (RoPE)", "litgpt GPT (RoPE)"),
    ("decoding_step", "eager, growing cache", "zoo decoding step, growing cache (batch 1)"),
    ("decoding_step", "eager, static cache", "zoo decoding step, static cache, eager"),
]


def launches() -> str:
    """docs/performance.md: kernel launches and host reads per step (`python benchmarks/launches.py`)."""
    result = load("launches.json")
    before = result["before_this_change"]
    out = ["| step | launches | host reads | launches before | host reads before |", "|---|---|---|---|---|"]
    for part, key, label in LAUNCH_ROWS:
        now = result[part][key]
        then = before.get(part, {}).get(key)
        cells = [label, str(now["launches"]), str(now["host_reads"])]
        cells += [str(then["launches"]), str(then["host_reads"])] if then else ["", ""]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def _tokens(n: float) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.0f} M"


def data_scale_runs() -> str:
    """docs/data.md: time to the first step and peak memory by corpus size, cold and warm. The
    corpora are read with `tokenizer=byte`: one token a byte of the file."""
    result = load("data_scale.json")
    out = [
        "| corpus | tokens | first step, cold | first step, warm | peak RSS, cold | peak RSS, warm |",
        "|---|---|---|---|---|---|",
    ]
    for mb in result["sizes_mb"]:
        runs = result["runs"][f"{mb}MB"]
        cold, warm = runs["cold"], runs["warm"]
        out.append(
            f"| {mb} MB | {_tokens(mb * 2**20)} | {cold['wall_s']:.1f} s | {warm['wall_s']:.1f} s | "
            f"{max(cold['rank_peak_rss_mib']):,} MiB | {max(warm['rank_peak_rss_mib']):,} MiB |"
        )
    return "\n".join(out) + "\n"


TOKENIZERS = {"byte": "byte", "sentencepiece_bpe": "SentencePiece BPE, 8,192 pieces"}


def data_scale_throughput() -> str:
    """docs/data.md: tokenization alone, zoo's preparation beside nanoGPT's prepare.py approach."""
    result = load("data_scale.json")["throughput"]
    out = ["| tokenizer | processes | zoo tokens/s | nanoGPT-style tokens/s |", "|---|---|---|---|"]
    for kind, label in TOKENIZERS.items():
        for procs in (1, 2):
            zoo = result[f"zoo {kind} num_proc={procs}"]["tokens_per_s"]
            peer = result[f"nanoGPT-style {kind} num_proc={procs}"]["tokens_per_s"]
            out.append(f"| {label} | {procs} | {zoo / 1e6:.1f} M | {peer / 1e6:.2f} M |")
    return "\n".join(out) + "\n"


def plan_check_table(rows: list[dict]) -> str:
    """The table of benchmarks/plan_check.py (which prints it with this function)."""

    def mib(n: float) -> str:
        return f"{n / 2**20:.1f} MiB"

    out = [
        "| config | precision | batch x seq_len | planned | measured | ratio | planned above weights | measured "
        "above weights | ratio | default malloc RSS |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['name']} | {r['precision']} | {r['batch']} x {r['seq_len']} | {mib(r['planned_total_bytes'])} | "
            f"{mib(r['measured_total_bytes'])} | {r['ratio_total']:.3f} | {mib(r['planned_training_bytes'])} | "
            f"{mib(r['measured_training_bytes'])} | {r['ratio_training']:.3f} | "
            f"{mib(r['measured_default_malloc_total_bytes'])} |"
        )
    return "\n".join(out) + "\n"


def plan_check() -> str:
    """docs/memory-planner.md: zoo-plan against measured peaks (`python benchmarks/plan_check.py`)."""
    return plan_check_table(load("plan_check.json")["configs"])


def mixer_decode() -> str:
    """docs/performance.md: decoding by context, per mixer (`python benchmarks/mixer_decode.py`)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from zoo.bench.report import decode_arms_table

    return decode_arms_table(load("mixer_decode_cpu.json"))


# name -> (page under docs/, writer)
TABLES: dict[str, tuple[str, Callable[[], str]]] = {
    "reference": ("performance.md", reference),
    "gpu_train": ("performance.md", gpu_train),
    "launches": ("performance.md", launches),
    "data_scale_runs": ("data.md", data_scale_runs),
    "data_scale_throughput": ("data.md", data_scale_throughput),
    "plan_check": ("memory-planner.md", plan_check),
    "mixer_decode": ("performance.md", mixer_decode),
}


def markers(name: str) -> tuple[str, str]:
    return f"<!-- table:{name} -->\n", f"<!-- /table:{name} -->"


def current(name: str) -> str:
    """The table as the page has it now."""
    page, _ = TABLES[name]
    text = (DOCS / page).read_text()
    start, end = markers(name)
    if start not in text or end not in text:
        raise LookupError(f"docs/{page} has no {start.strip()} ... {end} block")
    return text[text.index(start) + len(start) : text.index(end)]


def write(name: str) -> bool:
    """Write the table into its page; True when the page changed."""
    page, writer = TABLES[name]
    path = DOCS / page
    text = path.read_text()
    start, end = markers(name)
    old = current(name)
    new = writer()
    if old == new:
        return False
    i = text.index(start) + len(start)
    path.write_text(text[:i] + new + text[text.index(end) :])
    return True


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        stale = [f"docs/{TABLES[n][0]}: table {n}" for n in TABLES if current(n) != TABLES[n][1]()]
        for line in stale:
            print(f"stale: {line} (python benchmarks/doc_tables.py)", file=sys.stderr)
        return 1 if stale else 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    for name in TABLES:
        if write(name):
            print(f"wrote docs/{TABLES[name][0]}: table {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
