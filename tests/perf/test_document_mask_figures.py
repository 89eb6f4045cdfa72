"""docs/performance.md quotes the document-mask throughput of benchmarks/results/document_mask.json
as that file gives it (a rerun that changes a figure fails this until the page says the new one)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_page_gives_each_runs_figures():
    runs = json.loads((ROOT / "benchmarks" / "results" / "document_mask.json").read_text())["runs"]
    page = " ".join((ROOT / "docs" / "performance.md").read_text().split())
    assert runs
    for i, run in enumerate(runs, 1):
        rate = run["tokens_per_s"]
        row = (
            f"| {i} | {run['rounds']} × {run['command'].split('--steps ')[1]} | {rate['off']} | {rate['on']} | "
            f"{run['on_relative_to_off']:.2f} |"
        )
        assert row in page, row
        assert run["command"] in page
