"""The per-run tables a report is rebuilt from: `runs.csv` (one row per run of every arm, and
one per run left out), `heldout.csv` (with tune=: each seed's held-out measurement) and
`comparison.json` (what was compared: the kind of report, the metric, the keys, the baseline,
whether every pair was compared, the settings every run held fixed, the keys that change with a
scale= key) and, with pairs=all, `pairs.csv`.

`runs.csv` holds, for every run: its directory relative to the sweep it was found in (`sweep`,
`run`), its arm and the values of the arm's settings (the columns of report.csv, which name a
layer pattern by `zoo.compare.patterns`: runs.csv keeps the list), the size (the scale= key's
value), the seed, the learning rate (`optim.lr`) and the tune= key's value, every final metric
the run's summary holds, N (non-embedding parameters), D (tokens seen), the forward FLOPs per
token and the training compute C = 3 · F · D (F the forward FLOPs per training token, which
include modules that run only in training: where any run has them, F is a column of its own,
`train_flops_per_token`), the vocabulary size V (the loss of a uniform
prediction is ln V), its status and, for a run without a final result, why. `read_runs` turns
the table back into runs that `zoo.compare.recompute` compares again, so every interval of the
report can be rebuilt from the table alone."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zoo.compare.escape import FORMULA_START, csv_cell
from zoo.compare.runs import (
    ORDER_SEED,
    PLACED,
    Run,
    RunStatus,
    at,
    number,
    training_compute,
    training_flops_per_token,
    trains_more_than_it_keeps,
)
from zoo.compare.verdict import pair_rows
from zoo.config.records import reader
from zoo.config.records.atomic import replacing, write_text
from zoo.config.records.reader import Column

RUNS = "runs.csv"
HELDOUT = "heldout.csv"
PAIRS = "pairs.csv"
SPEC = "comparison.json"
LR = "optim.lr"
ACCOUNTING = [
    "N",
    "N_total",
    "D",
    "flops_per_token",
    "compute",
    "params",
    "train_tokens",
    "vocab_size",
    "tokens_per_s",
    "wall_seconds",
]
# where any run trains modules that the model does not keep (task.mtp_depth's): each run's forward
# FLOPs per training token, which C counts (`zoo.compare.runs.training_flops_per_token`)
TRAIN_FLOPS = "train_flops_per_token"
UNSET = "(unset)"  # how a report shows a setting a run does not have
TAIL = "last_k_sd"  # a run's spread over its last k validations (zoo.compare.noise, which reads it back)
TAIL_FROM = "last_k_from"  # where that window starts, as a fraction of the run's last validated step


def vocab_size(run: Run) -> float | None:
    """The run's vocabulary size: its summary's tokenizer record, else its tokenizer setting (a
    byte tokenizer's setting says nothing); None when neither says."""
    size = at(run.summary, "tokenizer", "vocab_size")
    if isinstance(size, (int, float)) and not isinstance(size, bool) and size > 0:
        return float(size)
    size = run.config.get("tokenizer.vocab_size")
    if run.config.get("tokenizer.kind") != "byte" and isinstance(size, int) and size > 0:
        return float(size)
    return None


def _accounting(run: Run) -> dict[str, float | None]:
    flops, tokens = number(run, "model", "flops_per_token"), number(run, "tokens_seen")
    active = number(run, "model", "active_non_embedding_params")  # a mixture's; absent in older records
    total = number(run, "model", "non_embedding_params")
    return {
        "N": active if active else total,
        "N_total": total,
        "D": tokens,
        "flops_per_token": flops,
        "compute": training_compute(run),
        "params": number(run, "model", "total_params"),
        "train_tokens": number(run, "data", "train_tokens"),
        "vocab_size": vocab_size(run),
        "tokens_per_s": number(run, "tokens_per_s"),
        "wall_seconds": number(run, "wall_seconds"),
    }


def run_place(run: Run) -> tuple[str, str]:
    """(the sweep's directory name, the run's directory relative to it)."""
    root = Path(run.root) if run.root is not None else run.path.parent
    try:
        relative = run.path.relative_to(root)
    except ValueError:
        return root.resolve().name, run.path.name
    return (root.name or root.resolve().name), relative.as_posix()


def shown_error(run: Run) -> str:
    """The run's error on one line, its directory written as its place (`sweep/run`, as runs.csv
    names it) wherever the message names it: a report holds no path of the machine it was made on."""
    error = " ".join(run.error.split())
    place = "/".join(run_place(run))
    for where in dict.fromkeys((str(run.path.resolve()), str(run.path))):
        if where not in (".", ""):
            error = error.replace(where, place)
    return error


def swept(report) -> list[str]:
    """The sweeps `report`'s runs came from (its arms' and those left out), each once, as runs.csv
    names them: a report says the same whether built from the run directories or rebuilt."""
    runs = [run for arm in report.arms for run in arm.runs] + report.unreadable
    return list(dict.fromkeys(run_place(r)[0] for r in runs))


def write_runs(
    report,
    out: Path,
    *,
    kind: str,
    scale: str | None = None,
    tune: str | None = None,
    irreducible: bool | None = None,
    pairs: bool = False,
    held: dict[str, Any] | None = None,
    linked: list[str] | None = None,
    agree: float | None = None,
    tails: dict[Any, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """runs.csv and comparison.json for `report` (a Report, TunedReport or ScaleReport: each has
    arms with `name`, `settings` and `runs`, a `baseline`, `keys` and `unreadable` runs); `held`:
    the settings every run shares (`zoo.compare.design.held_settings`), kept as `fixed`; `linked`:
    the keys that change with the scale= key (depth, heads, steps of a size), kept as `linked`
    where there are any. `tails` ({run path: its last-k spread}, a `zoo.compare.noise.Tail`) adds
    the column last_k_sd where any run has one, and last_k_from where any such spread knows where its
    window starts; `extra` (equivalence=, threshold=, last_k=) is kept in
    comparison.json where given; a data-order seed that any run sets is a column of its own."""
    arms = [(arm, run) for arm in report.arms for run in arm.runs] + [(None, run) for run in report.unreadable]
    metrics = list(dict.fromkeys(k for _, r in arms for k in (r.summary.get("metrics") or {})))
    order = any(r.config.get(ORDER_SEED) is not None for _, r in arms)
    place = place_keys({"settings": report.keys, "scale": scale, "tune": tune, "order_seed": order})
    tails = tails or {}
    starts = any(t.start is not None for t in tails.values())
    tail_head = ([TAIL] if tails else []) + ([TAIL_FROM] if starts else [])
    training_only = trains_more_than_it_keeps([r for _, r in arms])
    train_head = [TRAIN_FLOPS] if training_only else []
    head = ["sweep", "run", "arm", *place, *metrics, *ACCOUNTING, *train_head, *tail_head, "status", "error"]
    with replacing(out / RUNS) as handle:
        writer = csv.writer(handle)
        writer.writerow([csv_cell(h) for h in head])
        for arm, run in arms:
            sweep, where = run_place(run)
            settings = arm.settings if arm is not None else {}
            cells = [sweep, where, arm.name if arm is not None else ""]
            for key in place:  # a setting's value itself, not the name it shows as (zoo.compare.patterns)
                value = run.config.get(key)
                cells.append((UNSET if value is None else str(value)) if key in settings else value)
            final = {
                k: (v if run.status == RunStatus.finished else None)
                for k, v in (run.summary.get("metrics") or {}).items()
            }
            cells += [final.get(m) for m in metrics]
            accounting = _accounting(run)
            cells += [accounting[k] for k in ACCOUNTING]
            cells += [training_flops_per_token(run)] if training_only else []
            tail = tails.get(run.path)
            cells += [None if tail is None else tail.sd] if tails else []
            cells += [None if tail is None else tail.start] if starts else []
            cells += [run.status.value, shown_error(run)]
            writer.writerow([csv_cell(c) for c in cells])
    spec = {
        "kind": kind,
        "metric": report.metric,
        "baseline": report.baseline.name,
        "settings": list(report.keys),
        "scale": scale,
        "tune": tune,
        "metrics": metrics,
        "pairs": pairs,
        "fixed": held or {},
    }
    if linked:
        spec["linked"] = list(linked)
    if irreducible is not None:
        spec["irreducible"] = irreducible
    if agree is not None:  # scale= agree=: the rate a size's decisions are held to (zoo.compare.transfer)
        spec["agree"] = agree
    if order:
        spec["order_seed"] = True
    spec.update({k: v for k, v in (extra or {}).items() if v is not None})
    write_text(out / SPEC, json.dumps(spec, indent=2) + "\n")
    return {"runs_csv": out / RUNS, "comparison": out / SPEC}


def write_heldout(rows: list[dict], out: Path) -> Path:
    """heldout.csv: one row per seed of each arm (and size): the value it was measured at, chosen
    on the arm's other seeds, and its final metric there."""
    with replacing(out / HELDOUT) as handle:
        head = list(rows[0]) if rows else ["arm", "seed", "chosen", "value", "run"]
        writer = csv.DictWriter(handle, fieldnames=head)
        writer.writerow({k: csv_cell(k) for k in head})
        writer.writerows({k: csv_cell(v) for k, v in row.items()} for row in rows)
    return out / HELDOUT


def write_pair_rows(pairs: list, out: Path) -> Path:
    """pairs.csv (pairs=all): one row per pair of arms, its difference, intervals and p-values
    (`zoo.compare.verdict.pair_rows`)."""
    rows = pair_rows(pairs)
    head = list(rows[0]) if rows else ["arm", "other", "diff"]
    with replacing(out / PAIRS) as handle:
        writer = csv.DictWriter(handle, fieldnames=head)
        writer.writerow({k: csv_cell(k) for k in head})
        writer.writerows({k: csv_cell(v) for k, v in row.items()} for row in rows)
    return out / PAIRS


def cell_value(cell: str) -> Any:
    """A cell back as the value it was written from: "" None, numbers as int or float, text
    without the quote `csv_cell` put before a formula-like start."""
    if cell == "":
        return None
    if cell.startswith("'") and cell[1:].startswith(FORMULA_START):
        return cell[1:]
    for kind in (int, float):
        try:
            return kind(cell)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(cell, cell)


def read_table(
    path: Path, columns: Sequence[Column] = (), *, root: Path | None = None
) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """(header, rows, rows) of a report's table as {column: value}, read by zoo's one reader of
    the files it reads back (`zoo.config.records.reader`: a regular file inside `root`, default
    the table's directory, of bounded size, UTF-8, its `columns` there and fit). A column named
    twice (runs.csv's tokens_per_s: among the metrics the last value logged, among the
    accounting the run's own) gives in the first rows the value of its last occurrence, in the
    second of its first."""
    raw, cells = reader.read_table(
        path, columns, root=path.parent if root is None else root, remedy=reader.REPORT_REMEDY
    )
    head = [str(cell_value(h)) for h in raw]
    values = [list(map(cell_value, row)) for row in cells]
    return (
        head,
        [dict(zip(head, row)) for row in values],
        [dict(reversed(list(zip(head, row)))) for row in values],
    )


SPEC_FIELDS: dict[str, tuple[type, ...]] = {
    "kind": (str,),
    "metric": (str,),
    "baseline": (str,),
    "settings": (list,),
    "scale": (str, type(None)),
    "tune": (str, type(None)),
    "metrics": (list,),
    "pairs": (bool, type(None)),
    "fixed": (dict, type(None)),
    "linked": (list, type(None)),
    "irreducible": (bool, type(None)),
    "agree": (float, int, type(None)),
    "order_seed": (bool, type(None)),
    "equivalence": (float, int, type(None)),
    "threshold": (float, int, type(None)),
    "last_k": (int, type(None)),
}
KINDS = {"plain": (False, False), "tuned": (False, True), "scaled": (True, None)}  # kind: (scale=, tune=)


def read_spec(directory: Path) -> dict[str, Any]:
    """comparison.json of the report in `directory`, each field of its type (`SPEC_FIELDS`), a
    list of names a list of text, and its kind one that compares what it names: a plain report
    no scale= or tune= key, a tuned one a tune= key, a scaled one a scale= key. DamagedRecord
    (one line naming the field) otherwise."""
    path = directory / SPEC
    spec = reader.read_json_object(path, root=directory, remedy=reader.REPORT_REMEDY)
    reader.check_fields(path, spec, SPEC_FIELDS, remedy=reader.REPORT_REMEDY)
    for key in ("settings", "metrics", "linked"):
        if any(not isinstance(name, str) for name in spec.get(key) or []):
            raise reader.DamagedRecord(f"{path}: {key} holds a value that is not a name; {reader.REPORT_REMEDY}")
    if spec["kind"] not in KINDS:
        raise reader.DamagedRecord(
            f"{path}: kind is {spec['kind']!r}, not one of {', '.join(KINDS)}; {reader.REPORT_REMEDY}"
        )
    for key, wanted in zip(("scale", "tune"), KINDS[spec["kind"]]):
        if wanted is not None and wanted != bool(spec.get(key)):
            said = f"names no {key}= key" if wanted else f"names {key}={spec[key]}"
            raise reader.DamagedRecord(f"{path}: kind is {spec['kind']!r} but it {said}; {reader.REPORT_REMEDY}")
    if spec["metrics"] and spec["metric"] not in spec["metrics"]:
        raise reader.DamagedRecord(
            f"{path}: metric {spec['metric']} is not one of its metrics ({', '.join(spec['metrics'])}); "
            f"{reader.REPORT_REMEDY}"
        )
    return spec


def place_keys(spec: dict[str, Any]) -> list[str]:
    """The settings that place a run of the report: the arms' keys, the size, the seed (and the
    data-order seed where a run set one), the learning rate and the tuned key."""
    scale, tune = spec.get("scale"), spec.get("tune")
    seeds = ["seed", *([ORDER_SEED] if spec.get("order_seed") else [])]
    return list(dict.fromkeys([*spec["settings"], *([scale] if scale else []), *seeds, LR, *([tune] if tune else [])]))


def runs_columns(spec: dict[str, Any]) -> list[Column]:
    """runs.csv's schema for the report `spec` describes: where each run is, its arm, the
    settings that place it, every final metric (a finite figure of a run), the accounting
    (counts), its status and error."""
    return [
        Column("sweep", "name"),
        Column("run", "name"),
        Column("arm"),
        *[Column(csv_cell(k), "setting") for k in place_keys(spec)],
        *[Column(csv_cell(m), "figure") for m in spec["metrics"]],
        *[Column(a, "count") for a in ACCOUNTING],
        Column(TRAIN_FLOPS, "count", required=False),
        *([Column(TAIL, "count", required=False)] if spec.get("last_k") else []),
        *([Column(TAIL_FROM, "count", required=False)] if spec.get("last_k") else []),
        Column("status", "word", words=tuple(s.value for s in RunStatus)),
        Column("error"),
    ]


def read_runs(directory: Path) -> tuple[dict, list[Run], list[Run]]:
    """(comparison.json, the runs of the arms, the runs left out) rebuilt from runs.csv: each run
    with the config that places it (the arm's settings, size, seed, rate, tuned key) and the
    summary the comparison reads (final metrics, N, D, FLOPs, vocabulary). Both files are read
    against their schemas (`read_spec`, `runs_columns`): a run's damaged figure is refused on
    one line, never averaged."""
    spec = read_spec(directory)
    keys = place_keys(spec)
    columns = runs_columns(spec)
    _, last, first = read_table(directory / RUNS, columns)
    runs: list[Run] = []
    left_out: list[Run] = []
    for row, early in zip(last, first):
        config = {k: (None if row.get(k) == UNSET and k in spec["settings"] else row.get(k)) for k in keys}
        if row["arm"] is not None:  # the settings every run shared (the report's "Held fixed" line)
            config = {**spec.get("fixed", {}), **config}
        config[PLACED] = row["arm"]  # the arm it was placed in, whatever its settings read as
        summary: dict[str, Any] = {
            "status": row["status"],
            "metrics": {m: early.get(m) for m in spec["metrics"] if early.get(m) is not None},
            "model": {
                "non_embedding_params": row.get("N_total") or row["N"],
                "active_non_embedding_params": row["N"],
                "flops_per_token": row["flops_per_token"],
                "total_params": row["params"],
            },
            **({"train_flops_per_token": row[TRAIN_FLOPS]} if row.get(TRAIN_FLOPS) is not None else {}),
            "tokens_seen": row["D"],
            "tokens_per_s": row["tokens_per_s"],
            "wall_seconds": row["wall_seconds"],
            "data": {"train_tokens": row["train_tokens"]},
            "tokenizer": {"vocab_size": row["vocab_size"]},
        }
        run = Run(
            path=Path(str(row["sweep"])) / str(row["run"]),
            overrides=[],
            config=config,
            status=RunStatus(row["status"]),
            summary=summary,
            error=str(row["error"] or ""),
            root=Path(str(row["sweep"])),
            tail_sd=row.get(TAIL),
            tail_from=row.get(TAIL_FROM),
        )
        (runs if row["arm"] is not None else left_out).append(run)
    if runs and spec["baseline"] not in {r.config[PLACED] for r in runs}:
        raise reader.DamagedRecord(
            f"{directory / SPEC}: baseline is {spec['baseline']!r}, an arm no run of {RUNS} is in; "
            f"{reader.REPORT_REMEDY}"
        )
    return spec, runs, left_out
