"""The documentation's measured figures are the committed result files' figures: every generated
table equals what `python benchmarks/doc_tables.py` writes from benchmarks/results/, and each
figure the prose quotes from a result file or a report is formatted here from that file and
found, word for word, in its page. A rerun benchmark or report that changes a figure fails this
until the page says the new one."""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RESULTS = ROOT / "benchmarks" / "results"
REPORTS = ROOT / "reports"

sys.path.insert(0, str(ROOT / "benchmarks"))
import doc_tables  # noqa: E402


def page(name: str) -> str:
    """A page's text with every run of whitespace one space (lines wrap anywhere)."""
    return " ".join((DOCS / name).read_text().split())


def unsaid(name: str, *fragments: str) -> list[str]:
    """The fragments (figures written as the result files give them) that docs/NAME does not say."""
    text = page(name)
    return [f for f in fragments if " ".join(f.split()) not in text]


def result(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def row(res: dict, name_start: str, variant: str) -> dict:
    return next(r for r in res["rows"] if r["name"].startswith(name_start) and r["variant"] == variant)


def report(study: str, file: str = "report.csv") -> list[dict]:
    with open(REPORTS / study / file, newline="") as f:
        return list(csv.DictReader(f))


def signed(x: float, digits: int) -> str:
    """+0.37 / −0.008, with the minus sign the pages use."""
    return f"{x:+.{digits}f}".replace("-", "−")


def negated(r: dict) -> dict:
    """The difference the other way round (a gain where the report has a loss)."""
    return {"diff": -float(r["diff"]), "ci_low": -float(r["ci_high"]), "ci_high": -float(r["ci_low"])}


def interval(r: dict, digits: int, sign: bool = True) -> str:
    fmt = (lambda x: signed(x, digits)) if sign else (lambda x: f"{x:.{digits}f}")
    return f"{fmt(float(r['diff']))} [{fmt(float(r['ci_low']))}, {fmt(float(r['ci_high']))}]"


@pytest.mark.parametrize("name", sorted(doc_tables.TABLES))
def test_each_generated_table_is_the_result_files(name):
    assert doc_tables.current(name) == doc_tables.TABLES[name][1](), (
        f"docs/{doc_tables.TABLES[name][0]}: table {name} is stale: python benchmarks/doc_tables.py"
    )


def test_the_performance_targets_are_the_reference_results():
    ref = result("reference.json")
    t = "train_tokens_per_s"
    zoo, hf, xt = (row(ref, n, "eager") for n in ("zoo", "hf", "x-transformers"))
    ratios = ref["ratios"]
    peaks = ref["matmul_flops_per_s"]
    assert not unsaid(
        "performance.md",
        f"float32 matmul measured at {peaks['float32'] / 1e9:,.0f} GFLOP/s, bf16 {peaks['bfloat16'] / 1e9:,.0f} GFLOP/s",
        f"{zoo[t] / max(hf[t], xt[t]):.2f} × (zoo {zoo[t]:,.0f} vs HF {hf[t]:,.0f}; x-transformers {xt[t]:,.0f})",
        f"| with torch.compile ≥ 1.0 × HF GPT-2 compiled | {ratios['train compile: zoo / hf']:.2f} × |",
        f"| bf16 autocast ≥ 1.6 × its own float32 | {ratios['train bf16: zoo bf16 / zoo float32']:.2f} × |",
        f"{zoo['mfu']:.0%} (HF {hf['mfu']:.0%}, x-transformers {xt['mfu']:.0%})",
        f"{ratios['fit / bare step (eager)']:.0%} eager, {ratios['fit / bare step (bf16)']:.0%} bf16",
        f"eager vs eager {ratios['generate batch 1: zoo / hf']:.2f} ×",
        f"vs HF `generate` {ratios['generate batch 1: zoo compiled static step / hf eager']:.2f} ×, "
        f"vs HF with its static cache compiled {ratios['generate batch 1: zoo / hf, both compiled']:.2f} ×",
        f"Generation eager vs eager ({ratios['generate batch 1: zoo / hf']:.2f} ×)",
    )


def test_the_other_shapes_are_their_results():
    t = "train_tokens_per_s"
    bert = result("bert.json")
    zb, hb = row(bert, "zoo", "eager"), row(bert, "hf", "eager")
    r = bert["ratios"]
    assert not unsaid(
        "performance.md",
        f"{r['train eager: zoo / hf']:.2f} × (zoo {zb[t]:,.0f} vs {hb[t]:,.0f} tokens/s; bf16 "
        f"{r['train bf16: zoo / hf']:.2f} ×; forward latency {r['forward: hf / zoo latency']:.2f} ×)",
    )
    t5 = result("t5.json")
    zt, ht = row(t5, "zoo", "eager"), row(t5, "hf", "eager")
    r = t5["ratios"]
    spreads = sorted(round(x["train_spread"] * 100) for x in (zt, ht))
    assert not unsaid(
        "performance.md",
        f"{r['train eager: zoo / hf']:.2f} × (zoo {zt[t]:,.0f} vs {ht[t]:,.0f} tokens/s, spreads "
        f"{spreads[0]}–{spreads[1]}%); bf16 {r['train bf16: zoo / hf']:.2f} ×; generation "
        f"{r['generate batch 1: zoo / hf']:.2f} × (batch 1)",
        f"T5 ({r['train eager: zoo / hf']:.2f} ×)",
    )
    ctx = result("context_1024.json")
    z, h, x, c = (
        row(ctx, "zoo", "eager"),
        row(ctx, "hf", "eager"),
        row(ctx, "x-transformers", "eager"),
        row(ctx, "zoo", "checkpoint"),
    )
    assert not unsaid(
        "performance.md",
        f"trains at {z[t]:,.0f} tokens/s, {z[t] / h[t]:.2f} × HF GPT-2 ({h[t]:,.0f}) and {z[t] / x[t]:.2f} × "
        f"x-transformers ({x[t]:,.0f}), at {z['mfu']:.0%} MFU; checkpointed, {c[t]:,.0f} tokens/s "
        f"({1 - c[t] / z[t]:.0%} slower)",
    )
    deep = result("context_1024_8layers.json")
    z8, c8 = row(deep, "zoo", "eager"), row(deep, "zoo", "checkpoint")
    cut4, cut8 = 1 - c["memory_mb"] / z["memory_mb"], 1 - c8["memory_mb"] / z8["memory_mb"]
    assert not unsaid(
        "performance.md",
        f"{cut4:.0%} at the reference shape (4 layers: {z['memory_mb']:,.0f} → {c['memory_mb']:,.0f} MB",
        f"HF GPT-2 needs {h['memory_mb']:,.0f} MB, x-transformers {x['memory_mb']:,.0f} MB without it); "
        f"{cut8:.0%} at 8 layers ({z8['memory_mb']:,.0f} → {c8['memory_mb']:,.0f} MB)",
        f"the cut grows with depth: {cut4:.0%} at 4 layers, {cut8:.0%} at 8",
    )
    llama = result("llama.json")
    r = llama["ratios"]
    assert not unsaid(
        "performance.md",
        f"training {r['train eager: zoo / hf']:.2f} × HF Llama and {r['train eager: zoo / x-transformers']:.2f} × "
        f"x-transformers, generation {r['generate batch 1: zoo / hf']:.2f} × HF at batch 1 and "
        f"{r['generate batch 8: zoo / hf']:.2f} × at batch 8",
    )
    epyc = result("reference_epyc.json")
    z, h, lit, x = (row(epyc, n, "eager") for n in ("zoo", "hf", "litgpt", "x-transformers"))
    zb, hb, lb = (row(epyc, n, "bf16") for n in ("zoo", "hf", "litgpt"))
    assert not unsaid(
        "performance.md",
        f"(float32 matmul {epyc['matmul_flops_per_s']['float32'] / 1e9:,.0f} GFLOP/s)",
        f"zoo {z[t]:,.0f} tokens/s, HF {h[t]:,.0f}, litgpt {lit[t]:,.0f}, x-transformers {x[t]:,.0f} "
        f"(zoo {z[t] / h[t]:.2f} × HF, {z[t] / lit[t]:.2f} × litgpt, {z[t] / x[t]:.2f} × x-transformers); "
        f"bf16 {zb[t]:,.0f}, {zb[t] / hb[t]:.2f} × HF and {zb[t] / lb[t]:.2f} × litgpt",
    )


def test_the_gpu_figures_are_the_h100_record():
    run = RESULTS / "gpu" / "2026-11-26-h100"
    train = json.loads((run / "train.json").read_text())
    gen = json.loads((run / "generate.json").read_text())
    t = "train_tokens_per_s"
    zoo = row(train, "zoo", "bf16-compile")[t]
    best_peer = max(r[t] for r in train["rows"] if r["system"] != "zoo" and r["variant"] == "bf16-compile")
    before = 272_465  # the 2026-11-23 H100 figure, quoted by the record below
    assert f"{before:,}" in (run / "README.md").read_text()

    def g(name, variant, batch):
        return f"{row(gen, name, variant)[f'generate_tokens_per_s_batch{batch}']:,.0f}"

    assert not unsaid(
        "performance.md",
        f"zoo compiled is {zoo / best_peer:.2f} × the best compiled peer",
        f"{zoo / before:.2f} × its own figure before the changes above ({before:,} on 2026-11-23)",
        f"zoo eager {g('zoo', 'bf16', 1)} / {g('zoo', 'bf16', 8)} tokens/s against HF eager {g('hf', 'bf16', 1)} / "
        f"{g('hf', 'bf16', 8)} and HF static compiled {g('hf', 'bf16-compile', 1)} / {g('hf', 'bf16-compile', 8)}",
        f"zoo's compiled decoding measured {g('zoo', 'bf16-compile', 1)} / {g('zoo', 'bf16-compile', 8)}",
    )
    h200 = (RESULTS / "gpu_check_h200.md").read_text()
    m = re.search(r"(\d+) GPU tests: (\d+) passed, (\d+) failed", h200)
    assert m
    assert not unsaid("scaling-out.md", f"{m[1]} GPU tests, {m[2]} passed and {m[3]} failed")
    m = re.search(
        r"(\d+) of (\d+) tests finished inside the 210 s limit: (\d+)\s+passed", (run / "README.md").read_text()
    )
    assert m
    assert not unsaid(
        "scaling-out.md", f"{m[1]} of {m[2]} GPU tests finished within its 210 s limit, {m[3]} passed, 0 failed"
    )


def test_the_h200_figures_are_its_record():
    run = RESULTS / "gpu" / "2026-11-28-h200"
    gen = json.loads((run / "generate.json").read_text())

    def g(name, variant, batch):
        return row(gen, name, variant)[f"generate_tokens_per_s_batch{batch}"]

    zc1, zc8, hc1, hc8 = (
        g("zoo", "bf16-compile", 1),
        g("zoo", "bf16-compile", 8),
        g("hf", "bf16-compile", 1),
        g("hf", "bf16-compile", 8),
    )
    assert not unsaid(
        "performance.md",
        f"zoo compiled decodes {zc1:,.0f} / {zc8:,.0f} tokens/s at batch 1 / 8, against HF static compiled "
        f"{hc1:,.0f} / {hc8:,.0f} ({zc1 / hc1:.2f} × and {zc8 / hc8:.2f} ×) and zoo eager "
        f"{g('zoo', 'bf16', 1):,.0f} / {g('zoo', 'bf16', 8):,.0f}",
    )
    moe = json.loads((run / "moe_layer.json").read_text())["results"]

    def us(name, what):
        key = next(k for k in moe if k.startswith(name) and k.endswith(f" {what}") and "ratio" not in k)
        return moe[key]["us_per_token"]

    cells = []
    for name in ("dense", "moe E=8 top-2 F=1024 loop", "moe E=8 top-2 F=1024 grouped", "hf Mixtral block eager"):
        f, b = us(name, "forward"), us(name, "forward+backward")
        df, db = us("dense", "forward"), us("dense", "forward+backward")
        cells.append(f"{f:.3f} ({f / df:.2f} ×) | {b:.3f} ({b / db:.2f} ×)".replace("(1.00 ×)", "(1 ×)"))
    assert not unsaid("performance.md", *cells)
    docmask = json.loads((run / "document_mask.json").read_text())
    assert not unsaid(
        "performance.md",
        f"{docmask['tokens_per_s']['off']:,.0f} tokens/s off and {docmask['tokens_per_s']['on']:,.0f} on eager",
        f"on / off {docmask['on_relative_to_off']:.2f} in both",
    )
    record = json.loads((RESULTS / "gpu" / "2026-11-28-nvidia-h200.json").read_text())
    suite = record["suite"]
    assert not unsaid(
        "scaling-out.md", f"{suite['tests']} GPU tests, {suite['passed']} passed and {len(suite['failed'])} failed"
    )


def test_the_decoding_profile_figures_are_its_record():
    """performance.md's 2026-11-30 decoding figures are decode_profile.txt's: the tokens/s, the
    launches per new token, and the graph's device time per step."""
    text = (RESULTS / "gpu" / "2026-11-30-h200" / "decode_profile.txt").read_text()
    rate = re.search(r"tokens/s \(batch 1, (\d+) new tokens\): ([\d,]+)", text)
    launches = re.search(
        r"'cudaGraphLaunch': ([\d.]+), 'cudaMemcpyAsync': ([\d.]+), .*'cudaLaunchKernel': ([\d.]+)", text
    )
    graph = re.search(r"## Call CompiledFxGraph.*?(\d+\.\d+)us\s+(\d+)\s*$", text, re.M)
    assert rate and launches and graph
    graph_us = float(graph[1])
    step_us = 1e6 / int(rate[2].replace(",", ""))
    assert float(launches[1]) > 0.95 and float(launches[2]) > 0.95  # one replay, one copy per token
    assert not unsaid(
        "performance.md",
        f"zoo compiled decoded {rate[2]} tokens/s at batch 1",
        f"{launches[3]} kernel launches outside the graph per new token",
        f"the graph's kernels take {graph_us:.0f} µs of a step of about {step_us:.0f} µs",
    )


def test_the_gpt_fast_comparison_on_the_cpu_is_its_record():
    """performance.md's CPU decoding figures against gpt-fast-style decoding are
    decode_peers_cpu.json's: tokens/s and share of the bandwidth limit at batch 1, the ratios."""
    res = result("decode_peers_cpu.json")
    zoo, hf, fast = (row(res, name, "compile") for name in ("zoo", "hf", "gpt-fast"))

    def figure(r: dict) -> str:
        return f"{r['generate_tokens_per_s_batch1']:.1f}"

    ratios = res["ratios"]
    assert not unsaid(
        "performance.md",
        f"copy bandwidth there ({res['memory_bytes_per_s'] / 1e9:.0f} GB/s)",
        f"zoo decodes {figure(zoo)} tokens/s at batch 1 ({zoo['generate_bandwidth_share']:.0%} of its limit)",
        f"static cache {figure(hf)} ({hf['generate_bandwidth_share']:.0%})",
        f"gpt-fast-style decoding {figure(fast)} ({fast['generate_bandwidth_share']:.0%})",
        f"zoo / gpt-fast-style is {ratios['generate batch 1: zoo / gpt-fast-style, both compile']:.2f} at batch 1 "
        f"and {ratios['generate batch 4: zoo / gpt-fast-style, both compile']:.2f} at batch 4",
    )


def test_the_data_and_memory_figures_are_their_results():
    data = result("data_scale.json")["runs"]
    warm20, warm1000 = data["20MB"]["warm"], data["1000MB"]["warm"]
    ddp = data["1000MB"]["warm_ddp_cpu_2_ranks"]["rank_peak_rss_mib"]
    assert len(set(ddp)) == 1
    assert not unsaid(
        "data.md",
        f"Warm, the 1 GB run peaks {warm1000['rank_peak_rss_mib'][0] - warm20['rank_peak_rss_mib'][0]} MiB above "
        f"the 20 MB run",
        f"each of the 2 ranks peaks at {ddp[0]} MiB",
        f"tokenized in 2 processes and written in {data['1000MB']['cold']['wall_s']:.0f} s",
    )
    fsdp = result("fsdp_setup_memory.json")
    ranks = fsdp["ranks"]
    above = sorted(r["above_share_gib"] for r in ranks)
    assert not unsaid(
        "scaling-out.md",
        f"a Llama of {fsdp['parameters']:,} parameters ({fsdp['whole_model_gib']:.2f} GiB) peaks at "
        f"{ranks[0]['peak_gib']:.2f} and {ranks[1]['peak_gib']:.2f} GiB per rank at setup, its share of the "
        f"weights ({ranks[0]['share_of_weights_gib']:.2f} GiB) plus the process's own "
        f"{ranks[0]['tiny_model_peak_gib']:.2f} GiB (a tiny model's peak) plus {above[0]:.2f}–{above[1]:.2f} GiB",
        f"the same model peaks at {fsdp['whole_build_one_process_peak_gib']:.2f} GiB",
    )
    plan = result("plan_check.json")["configs"]
    ratios = [r["ratio_total"] for r in plan]
    assert not unsaid(
        "scaling-out.md", f"measured peaks for {len(plan)} configs ({min(ratios):.2f}–{max(ratios):.2f} of measured)"
    )
    assert not unsaid("memory-planner.md", f"({min(ratios):.2f} to {max(ratios):.2f})")


def test_the_reliability_figures_are_their_results():
    kill = result("kill_resume.json")
    killed = [d for d in kill["details"] if d["killed"]]
    steps = [d["checkpoint_step_at_kill"] for d in killed if d["checkpoint_step_at_kill"] is not None]
    assert not unsaid(
        "reliability.md",
        f"{kill['identical']} of {kill['trials']} identical (killed after {min(d['after_s'] for d in killed)} to "
        f"{max(d['after_s'] for d in killed)} s of a {kill['reference_seconds']} s run, from before the first "
        f"checkpoint to step {max(steps)} of 300)",
    )
    assert any(d["checkpoint_step_at_kill"] is None for d in killed)  # "from before the first checkpoint"
    stop = result("stop_latency.json")
    assert not unsaid(
        "reliability.md",
        f"median {stop['training_median_s']:.1f} s (at most {stop['training_max_s']:.1f} s) during training, "
        f"{stop['validation_median_s']:.1f} s (at most {stop['validation_max_s']:.1f} s) in a validation, "
        f"{stop['trials']} trials each",
    )
    soak = result("soak.json")
    assert not unsaid(
        "reliability.md",
        f"{soak['steps']:,} steps; resident memory {soak['rss_mb_after_warmup']:.0f} MB after warm-up",
        f"{soak['rss_mb_last_3_min']:.0f} MB over the last three minutes, {soak['rss_mb_max']:.0f} MB at most; "
        f"all {len(soak['checkpoints_loaded'])} checkpoints load, `metrics.csv` ({soak['metrics_rows']} rows) has "
        f"every step once, the resume reached step {soak['resumed_to_step']:,}",
    )


def test_the_mutation_scores_are_their_reports():
    """The rows of the scores after the tests written for the survivors (the first passes' rows
    were measured before those reports were kept)."""
    lines = (DOCS / "testing.md").read_text().splitlines()
    for name in ("mutation", "mutation_heldout", "mutation_compare"):
        res = result(f"{name}.json")
        tot = res["total"]
        (line,) = [ln for ln in lines if ln.startswith("|") and f"`benchmarks/results/{name}.md`" in ln]
        cells = [c.strip() for c in line.strip("|").split("|")][1:]
        survived = tot["survived"] + tot["not reached"] + tot["timeout"]
        score = "100%" if tot["score"] == 1 else f"{tot['score']:.1%}"
        assert [cells[0], cells[1], cells[2].split(" ")[0], cells[3], cells[4]] == [
            str(len(res["mutants"])),
            str(tot["killed"]),
            str(survived),
            str(tot["equivalent"]),
            score,
        ], (name, line)


def test_the_studies_headlines_are_their_reports():
    # norm ablation, tuned
    arms = {(r["model.norm"], r["model.norm_type"]): r for r in report("norm_tuned")}
    post, rms, pre = arms["post", "layernorm"], arms["pre", "rmsnorm"], arms["pre", "layernorm"]
    assert not unsaid(
        "ablations.md",
        f"by {interval(post, 2)} nats at its own best rate ({float(post['best optim.lr']):.0e} against pre-LN's "
        f"{float(pre['best optim.lr']):.0e}; Holm p {float(post['p_holm']):.3f})".replace("e-0", "e-"),
        f"RMSNorm and LayerNorm are not told apart: {interval(rms, 3)}",
    )
    # layer-norm placement
    arms = {(r["model.norm"], r["scheduler.warmup_steps"]): r for r in report("layernorm_placement")}
    assert not unsaid(
        "ablations.md",
        f"({interval(arms['post', '0'], 2)} nats), where an earlier version's run",
        f"post-LN beats pre-LN by {interval(negated(arms['post', '250']), 3, sign=False)}",
        f"pre-LN also loses without warmup at 500 steps ({interval(arms['pre', '0'], 2)})",
    )
    # GLU variants across scale: gated units minus GELU at each size
    rows = report("glu_scaling")
    loss = {(r["model.activation"], int(r["model.d_model"])): float(r["val/loss mean"]) for r in rows}
    sizes = sorted({d for _, d in loss})
    assert sizes == [24, 36, 48, 72, 96]
    gaps = {d: sorted(loss[a, d] - loss["gelu", d] for a in ("swiglu", "geglu")) for d in sizes}
    spread = max(loss[a, 96] for a in ("relu", "gelu", "swiglu", "geglu")) - min(
        loss[a, 96] for a in ("relu", "gelu", "swiglu", "geglu")
    )
    assert not unsaid(
        "ablations.md",
        f"(by +{gaps[24][0]:.2f} to +{gaps[24][1]:.2f} nats at 24, +{gaps[48][0]:.2f} to +{gaps[48][1]:.2f} at 48",
        f"all four units lie within {spread:.3f} nats",
    )
    resolved = [
        d
        for d in sizes
        if all(
            float(r["adj_low"]) > 0
            for r in report(f"glu_scaling/at_{d}")
            if r["model.activation"] in ("swiglu", "geglu")
        )
    ]
    assert resolved == [48]  # "the only width where Holm's adjustment resolves it"
    # μP transfer at three widths: each arm's best rate, μP's wider models against width 64, and
    # standard against μP at width 256, each at its own rate
    arms = {(int(r["model.d_model"]), r["model.parametrization"]): r for r in report("mup_transfer")}
    rate = {k: float(r["best optim.lr"]) for k, r in arms.items()}
    assert [rate[w, "standard"] for w in (64, 128, 256)] == [8e-3, 4e-3, 1e-3]
    assert {rate[w, "mup"] for w in (64, 128, 256)} == {8e-3}
    runs = report("mup_transfer", "runs.csv")
    best: dict = {}
    for r in runs:
        key = (r["model.parametrization"], r["model.d_model"], r["seed"])
        if key not in best or float(r["val/loss"]) < best[key][0]:
            best[key] = (float(r["val/loss"]), float(r["optim.lr"]))
    mup_seeds = [lr for (param, _, _), (_, lr) in best.items() if param == "mup"]
    wider = {f"{float(arms[w, 'mup']['diff']):.3f}" for w in (128, 256)}
    assert len(wider) == 1 and all(
        float(arms[w, "mup"]["adj_low"]) < 0 < float(arms[w, "mup"]["adj_high"]) for w in (128, 256)
    )
    at_256 = next(r for r in report("mup_transfer", "at_256/report.csv") if r["diff"])
    assert not unsaid(
        "ablations.md",
        f"The best rate transfers under μP (8e-3 at every width, {mup_seeds.count(8e-3)} of {len(mup_seeds)} seeds) "
        "and falls under standard (8e-3, 4e-3, 1e-3)",
        f"μP's wider models are not shown better than width 64 ({signed(float(wider.pop()), 3)} at 128 and 256, "
        "intervals span 0)",
        f"standard at its own rate beats μP at 256 by {interval(at_256, 3, sign=False)}",
    )
    assert not unsaid("composing.md", f"under μP on {mup_seeds.count(8e-3)} of {len(mup_seeds)} seeds")
    # length extrapolation: each scheme at its own rate (report.csv) and its perplexity by length (lengths/)
    ppl = {
        (r["model.position.kind"], r["model.position.nope_every"], r["rope_scaling"], r["multiple"]): float(
            r["ppl_mean"]
        )
        for r in report("length_extrapolation", "lengths/lengths.csv")
        if r["ppl_mean"]
    }

    def rise(kind: str, nope: str = "(unset)", rule: str = "") -> float:
        return ppl[kind, nope, rule, "8"] / ppl[kind, nope, rule, "1"] - 1

    growth = {k: rise(k) for k in ("sinusoidal", "rope", "none", "relative", "alibi")}
    assert max(growth, key=growth.get) == "sinusoidal" and min(growth, key=growth.get) == "alibi"
    diffs = {(r["model.position.kind"], r["model.position.nope_every"]): r for r in report("length_extrapolation")}
    leaders = (("alibi", "(unset)"), ("rope", "(unset)"), ("rope", "4"))
    ahead = sorted(-float(diffs[k]["diff"]) for k in leaders)
    assert all(float(diffs[k]["p_holm"]) < 0.05 for k in leaders)
    behind = float(diffs["none", "(unset)"]["diff"])
    assert float(diffs["none", "(unset)"]["adj_low"]) > 0
    shared = {r["model.position.kind"]: r for r in report("length_extrapolation", "one_rate/report.csv")}
    before = sorted(-float(shared[k]["diff"]) for k in ("learned", "none"))
    assert not unsaid(
        "ablations.md",
        f"ALiBi keeps its perplexity to 8× the trained length ({ppl['alibi', '(unset)', '', '1']:.2f} → "
        f"{ppl['alibi', '(unset)', '', '8']:.2f})",
        f"Sinusoidal positions degrade most (+{growth['sinusoidal']:.1%}); rotary and T5's bias rise "
        f"+{growth['rope']:.1%} each and no positions +{growth['none']:.1%}",
        f"halves rotary's rise (+{rise('rope', rule='yarn'):.1%}; +{rise('rope', '4', 'yarn'):.1%} with NoPE layers",
        f"NoPE layers alone change nothing (+{rise('rope', '4'):.1%})",
        f"are {ahead[0]:.2f}–{ahead[-1]:.2f} nats ahead of sinusoidal after Holm's adjustment, no positions "
        f"{behind:.2f} behind",
        f"at 1e-3 learned and no positions were {before[0]:.2f} ahead of sinusoidal",
    )
    assert f"{growth['rope']:.1%}" == f"{growth['relative']:.1%}"  # "each"
    assert f"{before[0]:.2f}" == f"{before[1]:.2f}"


def test_the_options_cost_table_is_its_record():
    """performance.md's table of each option's cost is options_cost.markdown of the committed
    benchmarks/results/options_cost.json, row for row."""
    import options_cost

    rows = result("options_cost.json")["rows"]
    table = options_cost.markdown(rows)
    assert not unsaid("performance.md", *table.splitlines()[2:])
