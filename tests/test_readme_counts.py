"""The README's test counts are what pytest collects today: all tests, the GPU tests, and the
fast tier (`-m "not slow"`) besides the GPU tests."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

COUNT = """
import json, sys, pytest

class Count:
    def pytest_collection_modifyitems(self, items):
        marks = [{m.name for m in item.iter_markers()} for item in items]
        self.found = {"all": len(items), "gpu": sum("gpu" in m for m in marks),
                      "fast": sum(not ({"gpu", "slow"} & m) for m in marks)}

count = Count()
pytest.main(["--collect-only", "-q", "-n", "0", "-p", "no:randomly", "tests"], plugins=[count])
print("COUNTS " + json.dumps(count.found))
"""


def _figure(pattern: str, text: str) -> int:
    match = re.search(pattern, " ".join(text.split()))
    assert match, pattern
    return int(match.group(1).replace(",", ""))


@pytest.mark.slow
def test_the_readme_states_the_counts_pytest_collects():
    out = subprocess.run([sys.executable, "-c", COUNT], cwd=ROOT, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("COUNTS ")]
    assert len(lines) == 1, out.stdout[-2000:] + out.stderr[-2000:]
    found = json.loads(lines[0][len("COUNTS "):])
    readme = (ROOT / "README.md").read_text()
    stated = {"all": _figure(r"`pytest` collects ([\d,]+) tests", readme),
              "gpu": _figure(r"collects [\d,]+ tests, ([\d,]+) of them GPU tests", readme),
              "fast": _figure(r"train for less than a second or two: ([\d,]+) of them besides the GPU tests", readme)}
    assert stated == found, f"README says {stated}, pytest collects {found}"
