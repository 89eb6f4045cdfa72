"""Every number a committed study's README, or docs/ablations.md's table of the studies, quotes
is one its tables give. The rule, for each README and each row of that table naming
`reports/NAME/`:

- a number with a decimal point is a measurement: it must equal, rounded to the decimals it is
  written with, a value of the study's tables (ignoring its sign, which the prose may say in
  words: "lower by 0.026"), or, written as a percentage, that value over 100; "1.4 × 10⁶" is
  read as the number it writes;
- the study's tables are every .csv and .md under its directory (README.md aside: the report,
  its per-size reports, heldout.csv, pairs.csv, runs.csv and the scripts' tables such as
  signals.md, routing.md, coord.md), those of the studies its README links to (`../NAME/`), and
  what its README says it computes from them (length_extrapolation's perplexity intervals,
  mean ± t · std / √n from lengths.csv, and its 8× over 1× ratios);
- a number without a decimal point (a size, a seed, a step count, a year, a count of runs) is the
  config's or the prose's, and is not checked;
- the few measurements no table holds are listed in NOT_IN_TABLES, each with where it comes
  from; an entry the text no longer quotes fails too.

The scripts' tables themselves are held to runs.csv by `zoo-compare recompute=`, which the test
of each committed report with a runs.csv runs (tests/compare/test_recompute.py). The studies with
no runs.csv are listed (NO_RUNS), each README saying so and giving the rerun's command."""

from __future__ import annotations

import bisect
import csv
import math
import re
import shutil
from pathlib import Path

import pytest

from zoo.compare.stats import t_quantile

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "reports"
ABLATIONS = ROOT / "docs" / "ablations.md"
STUDIES = sorted(p.parent.name for p in REPORTS.glob("*/README.md"))

# a number as prose writes it: sign (ASCII or U+2212), thousands commas, decimals, and an
# exponent written e-3 or "× 10⁶"; a percent sign after it
NUMBER = re.compile(
    r"(?<![\w.])([-+\u2212]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?"
    r"(\s*×\s*10[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+|[eE][-+]?\d+)?(%)?(?![\w])"
)
SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")

# the studies written before zoo-compare wrote runs.csv: nothing in them can be recomputed
NO_RUNS: dict[str, str] = {}
# earlier reports kept beside a study's current one as its history, each without runs.csv
HISTORY = {
    "glu_scaling/dn3",
    "glu_scaling/first_run",
    "glu_scaling/tune_xs",
    "layernorm_placement/earlier_version",
    "layernorm_placement/first_run",
    "length_extrapolation/one_rate",
    "length_extrapolation/small_embeddings",
    "mup_transfer/fine_grid",
    "mup_transfer/sqrt10_grid",
    "norm_tuned/earlier_version",
    "norm_tuned/first_run",
}

DN3 = "dn3's per-size paired intervals, from per-size reports not kept (dn3/ holds the scaled report only)"
SHARED_RATE = "a difference of two means of report.md's tuning table at one shared rate"
# measurements quoted that no committed table holds, by study: the number as written (without
# its sign) and where it comes from
NOT_IN_TABLES: dict[str, dict[str, str]] = {
    "glu_scaling": {
        "3.94": "the training split's size in MB (the corpus's, not a run's)",
        "5.7": "the median run time at D = 96 in minutes",
        **{n: DN3 for n in ("0.082", "0.038", "0.115", "0.120", "0.484", "0.228", "0.740", "0.074")},
        **{n: DN3 for n in ("0.429", "0.722")},
    },
    "muon_adamw": {
        "1.4": "Wen et al. 2025's speedup of the matrix-based optimizers at 0.1B parameters (the paper's)",
        "1.1": "the same at 1.2B parameters (the paper's)",
        "0.95": "AdamW's second beta, a setting of the recipe",
    },
    "layernorm_placement": {
        "5.94": "the corpus's unigram loss (from its token counts, not a run)",
    },
    "length_extrapolation": {
        "0.79": "non-embedding parameters in millions (793,344 in report.md)",
        "1.2": "tokens in millions (1,228,800 in report.md)",
        "4.6": "the median run time in minutes (runs.csv's wall_seconds)",
    },
    "norm_tuned": {
        "2.5": "the median run time in minutes",
        "0.06": "the first run's post-LN mean less the earlier version's",
        **{n: SHARED_RATE for n in ("0.139", "1.674", "1.568")},
    },
    "hybrid": {
        "1.3": "the paper's model size in billions of parameters",
        "0.9": "AdamW's first-moment decay, the recipe's setting",
        "0.95": "AdamW's second-moment decay, the recipe's setting",
    },
    "speedrun_ring": {
        **{
            n: "the claims' sources: modded-nanogpt's records (minutes), ResFormer's abstract, Qiu et al.'s Table 2, "
            "DeepSeek-V3's Table 4, marin issue 5772 (losses)"
            for n in (
                "4.66",
                "4.41",
                "16.11",
                "20.3",
                "3.3274",
                "3.3151",
                "7.499",
                "7.404",
                "0.2",
                "0.729",
                "2.93966",
                "2.92702",
                "0.01264",
                "0.0123",
            )
        },
        **{n: "an arXiv identifier" for n in ("2410.17897", "2505.06708", "2412.19437")},
    },
    "wortsman_instability": {"0.95": "AdamW's second-moment decay, the recipe's setting"},
    "wsd_tuned": {"0.8": "non-embedding parameters in millions (793,344 in report.md)"},
    "wsd_cooldown": {
        "0.92": "tokens in millions (D = 921,600 in report.md)",
        "1.23": "tokens in millions (D = 1,228,800 in report.md)",
    },
}


def value(match: re.Match) -> float:
    """The number a match of NUMBER writes, its sign and exponent applied, a percent not."""
    sign, whole, decimals, exponent, _ = match.groups()
    x = float(whole.replace(",", "") + (decimals or ""))
    if exponent and exponent[0] in "eE":
        x *= 10 ** int(exponent[1:])
    elif exponent:
        x *= 10 ** int(exponent.split("10", 1)[1].translate(SUPERSCRIPT))
    return -x if sign in ("-", "\u2212") else x


def _lengths(path: Path) -> set[float]:
    """What length_extrapolation's README computes from a lengths.csv: each perplexity's 95%
    interval (mean ± t · std / √n) and each arm's perplexity at the longest length over the trained."""
    with path.open(newline="", encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["ppl_mean"]]
    found = set()
    for row in rows:
        mean, std, n = float(row["ppl_mean"]), float(row["ppl_std"]), int(row["runs"])
        if n > 1 and math.isfinite(std):
            half = t_quantile(0.975, n - 1) * std / math.sqrt(n)
            found |= {mean - half, mean + half}
    by_arm: dict[tuple[str, str], dict[int, float]] = {}  # by arm and RoPE rule (extend=)
    for row in rows:
        by_arm.setdefault((row["arm"], row.get("rope_scaling") or ""), {})[int(row["multiple"])] = float(
            row["ppl_mean"]
        )
    for ppl in by_arm.values():
        if 1 in ppl and len(ppl) > 1:
            found.add(ppl[max(ppl)] / ppl[1] - 1)
    return found


def table_values(study: Path, linked: bool = True) -> list[float]:
    """Every value (its size) in the tables of `study` and of the studies its README links to,
    sorted."""
    found: set[float] = set()
    for path in study.rglob("*"):
        if path.suffix == ".csv":
            with path.open(newline="", encoding="utf-8") as handle:
                for row in csv.reader(handle):
                    for cell in row:
                        try:
                            found.add(float(cell))
                        except ValueError:
                            found |= {value(m) for m in NUMBER.finditer(cell)}
            if path.name == "lengths.csv":
                found |= _lengths(path)
        elif path.suffix == ".md" and path.name != "README.md":
            found |= {value(m) for m in NUMBER.finditer(path.read_text(encoding="utf-8"))}
    readme = study / "README.md"
    if linked and readme.is_file():
        for name in sorted(set(re.findall(r"\.\./(\w+)/", readme.read_text(encoding="utf-8")))):
            if (study.parent / name).is_dir() and name != study.name:
                found |= set(table_values(study.parent / name, linked=False))
    return sorted({abs(v) for v in found if math.isfinite(v)})


def _held(x: float, decimals: int, values: list[float]) -> bool:
    """Some value of `values` (sorted) rounds to `x` at `decimals` decimals."""
    half = 0.5 * 10.0**-decimals * (1 + 1e-9)
    at = bisect.bisect_left(values, x - half)
    return at < len(values) and values[at] <= x + half


def untabled(text: str, values: list[float], allowed: dict[str, str]) -> list[str]:
    """'line N: NUMBER' for each number of `text` with a decimal point that `values` does not
    give (the rule of this module) and `allowed` does not list."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for match in NUMBER.finditer(line):
            sign, whole, decimals, exponent, percent = match.groups()
            if not decimals or f"{whole}{decimals}" in allowed:
                continue
            x, places = abs(value(match)), len(decimals) - 1
            if exponent:  # its decimals count in the mantissa's units
                places -= round(math.log10(x / float(whole.replace(",", "") + decimals)))
            if _held(x, places, values) or (percent and _held(x / 100, places + 2, values)):
                continue
            found.append(f"line {n}: {match.group(0)}")
    return found


def _ablation_rows() -> dict[str, str]:
    """docs/ablations.md's rows of the studies' table, by the study each names."""
    rows: dict[str, list[str]] = {}
    for line in ABLATIONS.read_text(encoding="utf-8").splitlines():
        named = re.search(r"`reports/(\w+)/`", line)
        if line.startswith("| ") and named:
            rows.setdefault(named.group(1), []).append(line)
    return {k: "\n".join(v) for k, v in rows.items()}


@pytest.mark.parametrize("study", STUDIES)
def test_every_number_a_studys_readme_quotes_is_in_its_tables(study):
    text = (REPORTS / study / "README.md").read_text(encoding="utf-8")
    allowed = NOT_IN_TABLES.get(study, {})
    assert untabled(text, table_values(REPORTS / study), allowed) == [], study
    row = _ablation_rows().get(study, "")
    for number in allowed:  # each exception still quoted, so the list cannot outlive its numbers
        assert re.search(rf"(?<![\d.]){re.escape(number)}(?!\d)", text + row), (study, number)


def test_docs_ablations_rows_quote_their_studies_tables():
    rows = _ablation_rows()
    assert set(rows) == set(STUDIES), "a committed study without its row in docs/ablations.md, or the reverse"
    for study, text in rows.items():
        values = table_values(REPORTS / study)
        assert untabled(text, values, NOT_IN_TABLES.get(study, {})) == [], study


def test_a_number_changed_in_a_copy_of_a_readme_or_a_table_is_found(tmp_path):
    """The check can fail: a README whose number was moved, and tables that no longer give a
    number the README quotes, each give the line of that number."""
    study = Path(shutil.copytree(REPORTS / "moe_scaling", tmp_path / "moe_scaling"))
    readme = study / "README.md"
    text = readme.read_text(encoding="utf-8")
    values = table_values(study)
    assert untabled(text, values, {}) == []
    line = next(n for n, x in enumerate(text.splitlines(), 1) if "[−0.073, +0.302]" in x)
    moved = next(f"{k / 1000:.3f}" for k in range(74, 1000) if not _held(k / 1000, 3, values))  # no table's
    readme.write_text(text.replace("[−0.073, +0.302]", f"[−{moved}, +0.302]"), encoding="utf-8")
    assert untabled(readme.read_text(encoding="utf-8"), values, {}) == [f"line {line}: −{moved}"]
    # the README as committed, the tables changed so that none holds a value that rounds to 0.073
    # (the adjusted interval's end, and a few loads and losses that round to it too)
    for path in study.rglob("*"):
        if path.suffix in (".md", ".csv") and path.name != "README.md":
            table = path.read_text(encoding="utf-8")
            path.write_text(re.sub(r"(?<![\d.])0\.07(2[5-9]|3[0-4])\d*", moved, table), encoding="utf-8")
    quoted = [f"line {n}: −0.073" for n, x in enumerate(text.splitlines(), 1) if "−0.073" in x]
    assert untabled(text, table_values(study), {}) == quoted and f"line {line}: −0.073" in quoted


def test_studies_without_runs_csv_are_listed_and_say_how_to_rerun():
    """Not passed over: each is named here, and its README says its numbers cannot be
    recomputed and gives the recipe a rerun would use."""
    for study in STUDIES:
        assert (study in NO_RUNS) != (REPORTS / study / "runs.csv").is_file(), study
    for study, recipe in NO_RUNS.items():
        text = (REPORTS / study / "README.md").read_text(encoding="utf-8")
        assert "**These numbers cannot be recomputed.**" in text, study
        assert f"    zoo-train -cn {recipe}\n" in text and (ROOT / "recipes" / f"{recipe}.yaml").is_file(), study
        assert f"out=reports/{study}\n" in text, study
    history = {
        str(p.parent.relative_to(REPORTS))
        for p in REPORTS.glob("*/*/report.md")
        if not (p.parent / "runs.csv").is_file()
    }
    assert history == HISTORY
