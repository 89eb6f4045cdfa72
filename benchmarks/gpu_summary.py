"""Collect what `benchmarks/gpu_check.sh` wrote under its output directory into one dated JSON
record and a Markdown summary to paste into docs/performance.md (not a test).

    python benchmarks/gpu_summary.py OUT [--results benchmarks/results/gpu]

Reads OUT/gpu.txt (the device line, versions, date), OUT/<part>.json from each zoo-bench part
(train, generate, ...), OUT/gpu-suite.xml (pytest's JUnit report) and each part's exit status
(OUT/status.txt, "name status" lines). Writes RESULTS/<date>-<device>.json and OUT/summary.md,
and prints the summary. A part that did not run or ran out of time is named as such; the targets
of the GPU speed work are checked against what was measured, never assumed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

TARGETS = {  # the GPU speed work's targets
    "compiled training vs the best compiled peer": 1.25,
    "compiled training MFU": 0.50,
    "greedy decoding tokens/s at batch 1": 2000.0,
    "greedy decoding of llama-1b at batch 1, share of the bandwidth limit": 0.50,
}


def _device(out: Path) -> dict:
    lines = (out / "gpu.txt").read_text().splitlines() if (out / "gpu.txt").is_file() else []
    info = {"device": lines[0].split(",")[0].strip() if lines else "unknown", "versions": "", "date": ""}
    for line in lines[1:]:
        if line.startswith("torch"):
            info["versions"] = line.strip()
        elif re.fullmatch(r"\d{4}-\d{2}-\d{2}", line.strip()):
            info["date"] = line.strip()
    return info


def _status(out: Path) -> dict:
    path = out / "status.txt"
    if not path.is_file():
        return {}
    return {name: int(code) for name, code in (line.split() for line in path.read_text().splitlines() if line.strip())}


def _suite(out: Path) -> dict | None:
    path = out / "gpu-suite.xml"
    if not path.is_file():
        return None
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {key: sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    failed = [
        f"{case.get('classname')}::{case.get('name')}"
        for s in suites
        for case in s.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]
    return {
        **counts,
        "passed": counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"],
        "failed": failed,
    }


def _bench(out: Path) -> dict:
    parts = {}
    for path in sorted(out.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue
        if isinstance(data, dict) and "rows" in data and "workload" in data:
            parts[path.stem] = data
    return parts


def _layer_checks(out: Path) -> list[dict]:
    """The targets of the layer parts: the sliding-window model's training step by kernel
    against full attention (sliding-train.json, benchmarks/sliding_train.py)."""
    path, checks = out / "sliding-train.json", []
    if path.is_file():
        data = json.loads(path.read_text())
        for arm, ratio in data.get("relative_to_full", {}).items():
            if arm != "full":
                target = f"{arm} training at {data['seq_len']} tokens against full attention"
                checks.append({"target": target, "want": 1.0, "got": ratio})
    return checks


def _checks(parts: dict, out: Path | None = None) -> list[dict]:
    """Each target against the figures measured (absent when no part measured it)."""
    rows = [row for part in parts.values() for row in part["rows"]]
    checks = _layer_checks(out) if out is not None else []
    compiled = [r for r in rows if r["variant"].endswith("compile") and r.get("train_tokens_per_s")]
    zoo = [r for r in compiled if r["system"] == "zoo"]
    peers = [r for r in compiled if r["system"] != "zoo" and r["variant"] == (zoo[0]["variant"] if zoo else None)]
    if zoo and peers:
        ratio = zoo[0]["train_tokens_per_s"] / max(r["train_tokens_per_s"] for r in peers)
        checks.append({"target": "compiled training vs the best compiled peer", "want": 1.25, "got": ratio})
    if zoo and zoo[0].get("mfu") is not None:
        checks.append({"target": "compiled training MFU", "want": 0.50, "got": zoo[0]["mfu"]})
    big = parts.get("generate-llama-1b", {}).get("rows", [])
    shares = [r["generate_bandwidth_share"] for r in big if r["system"] == "zoo" and "generate_bandwidth_share" in r]
    if shares:
        target = "greedy decoding of llama-1b at batch 1, share of the bandwidth limit"
        checks.append({"target": target, "want": 0.50, "got": max(shares)})
    decoding = [r.get("generate_tokens_per_s_batch1") for r in rows if r["system"] == "zoo"]
    decoding = [d for d in decoding if d is not None]
    if decoding:
        checks.append({"target": "greedy decoding tokens/s at batch 1", "want": 2000.0, "got": max(decoding)})
    for check in checks:
        check["met"] = check["got"] >= check["want"]
    return checks


def _table(rows: list[dict], columns: list[tuple[str, str, str]]) -> list[str]:
    present = [c for c in columns if any(r.get(c[0]) is not None for r in rows)]
    lines = [
        "| system | variant | " + " | ".join(title for _, title, _ in present) + " |",
        "|---|---|" + "---|" * len(present),
    ]
    for r in rows:
        cells = [fmt.format(r[key]) if r.get(key) is not None else "" for key, _, fmt in present]
        lines.append(f"| {r['name']} | {r['variant']} | " + " | ".join(cells) + " |")
    return lines


def summarize(out: Path, results: Path) -> tuple[dict, str]:
    device, status, suite, parts = _device(out), _status(out), _suite(out), _bench(out)
    record = {
        **device,
        "status": status,
        "suite": suite,
        "bench": {
            name: {
                "workload": part["workload"],
                "rows": part["rows"],
                "ratios": part["ratios"],
                "unavailable": part.get("unavailable", {}),
            }
            for name, part in parts.items()
        },
        "targets": _checks(parts, out) if not device["device"].startswith("no GPU") else [],
    }
    md = [f"# GPU check on one {device['device']} ({device['date'] or 'undated'})", "", device["versions"], ""]
    for name, code in status.items():
        if code:
            md.append(f"- {name}: {'ran past its time limit' if code in (124, 137) else f'exit {code}'}")
    for name, part in parts.items():
        w = part["workload"]
        generation = any(r.get("generate_tokens_per_s_batch1") is not None for r in part["rows"])
        what = (
            f"greedy decoding, prompt {w['prompt']} + {w['new_tokens']} new tokens"
            if generation
            else f"training, batch {w['batch']} x {w['seq_len']}"
        )
        md += ["", f"## zoo-bench {name}: {what}, medians of {w['rounds']} rounds", ""]
        md += _table(
            part["rows"],
            [
                ("train_tokens_per_s", "train tokens/s", "{:,.0f}"),
                ("mfu", "MFU", "{:.0%}"),
                ("generate_tokens_per_s_batch1", "generate tokens/s (batch 1)", "{:,.0f}"),
                (
                    f"generate_tokens_per_s_batch{w['gen_batch']}",
                    f"generate tokens/s (batch {w['gen_batch']})",
                    "{:,.0f}",
                ),
                ("generate_bandwidth_share", "batch 1, share of the bandwidth limit", "{:.0%}"),
            ],
        )
    md += ["", "## GPU suite", ""]
    if suite is None:
        md.append("no report (the suite did not run or was stopped before it wrote one)")
    else:
        md.append(
            f"{suite['tests']} tests: {suite['passed']} passed, {suite['failures'] + suite['errors']} failed, "
            f"{suite['skipped']} skipped"
        )
        md += [f"- failed: {name}" for name in suite["failed"]]
    md += ["", "## Targets", ""]
    for check in record["targets"]:
        fmt = "{:.0%}" if "MFU" in check["target"] or "share" in check["target"] else "{:,.2f}"
        md.append(
            f"- {check['target']}: {fmt.format(check['got'])} (target {fmt.format(check['want'])}): "
            f"{'met' if check['met'] else 'missed'}"
        )
    missing = [t for t in TARGETS if t not in {c["target"] for c in record["targets"]}]
    why = "no GPU: the targets are a GPU's" if device["device"].startswith("no GPU") else "not measured"
    md += [f"- {t}: {why}" for t in missing]
    text = "\n".join(md) + "\n"
    results.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", device["device"].lower()).strip("-") or "unknown"
    path = results / f"{device['date'] or 'undated'}-{slug}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    (out / "summary.md").write_text(text)
    record["path"] = str(path)
    return record, text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the directory gpu_check.sh wrote ($OUT)")
    parser.add_argument(
        "--results", type=Path, default=Path("benchmarks/results/gpu"), help="where the dated JSON record goes"
    )
    args = parser.parse_args(argv)
    if not args.out.is_dir():
        print(f"gpu_summary: {args.out} is not a directory", file=sys.stderr)
        return 2
    record, text = summarize(args.out, args.results)
    print(text, end="")
    print(f"record: {record['path']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
