"""The accounting every report opens with (N, D, D/N, epochs) and the warning for repeated data,
read from runs' summaries as zoo-train writes them."""

from __future__ import annotations

from pathlib import Path

from zoo.compare.design import accounting_line, repeat_warnings
from zoo.compare.runs import Run, RunStatus


def _run(n: int, tokens: int, split=None, status=RunStatus.finished) -> Run:
    summary = {"model": {"non_embedding_params": n}, "tokens_seen": tokens}
    if split is not None:
        summary["data"] = {"train_tokens": split}
    return Run(path=Path(f"/r/{n}-{tokens}"), overrides=[], config={}, status=status, summary=summary)


def test_one_design_is_stated_once():
    line = accounting_line([_run(1000, 3000, 6000), _run(1000, 3000, 6000)])
    assert line == (
        "Training: N = 1,000 non-embedding parameters, D = 3,000 tokens (D/N = 3), 0.50 epochs of the training split."
    )


def test_designs_that_differ_are_given_as_ranges():
    line = accounting_line([_run(1000, 3000, 6000), _run(4000, 12000, 6000)])
    assert "N = 1,000–4,000" in line and "D = 3,000–12,000" in line and "(D/N = 3)" in line
    assert "0.50–2.00 epochs" in line


def test_unfinished_runs_and_unknown_splits_do_not_count():
    line = accounting_line([_run(1000, 3000), _run(9, 9, 9, status=RunStatus.failed)])
    assert "N = 1,000 " in line and "epochs unknown" in line
    assert accounting_line([_run(0, 0)]).endswith("do not record their parameters and tokens.")


def test_reading_the_split_twice_is_warned_once():
    assert repeat_warnings([_run(10, 30, 60), _run(10, 60, 60)]) == []  # exactly one pass is no repeat
    warning = repeat_warnings([_run(10, 30, 60), _run(10, 90, 60), _run(10, 120, 60)])
    assert len(warning) == 1 and warning[0].startswith("2 run(s) read their training split up to 2.00 times")


def test_a_mixture_is_accounted_by_its_active_parameters_with_the_total_beside_them():
    moe = _run(4000, 3000, 6000)
    moe.summary["model"]["active_non_embedding_params"] = 1000
    line = accounting_line([moe])
    assert line.startswith("Training: N = 1,000 non-embedding parameters active (of 4,000 in all), ")
    assert "(D/N = 3)" in line
