"""What every report of a sweep (plain, tuned and scaled) says about the design before its
numbers: the settings held fixed and the model's shape, the accounting of parameters, tokens and
FLOPs, and the warnings a reader must see once each (runs that failed or never started, repeated
data, differences resting on too few seeds or on a flagged interval)."""

from __future__ import annotations

import re
from typing import Any

from zoo.compare.escape import code, text
from zoo.compare.joint import components, is_joint
from zoo.compare.runs import Run, RunStatus, epochs, number
from zoo.compare.stats import ZERO_SPREAD, Difference, t_quantile
from zoo.compare.table import cell_value, run_place, shown_error, vocab_size


def _show(value) -> str:
    return "(unset)" if value is None else str(value)


# the settings a reader of an ablation asks for first: shown once, when every run shares them
DESIGN_KEYS = (
    "data.source",
    "data.path",
    "tokenizer.kind",
    "tokenizer.vocab_size",
    "data.seq_len",
    "data.global_batch_size",
    "trainer.max_steps",
    "optim.kind",
    "optim.lr",
    "optim.weight_decay",
    "scheduler.kind",
    "scheduler.warmup_steps",
    "model.parametrization",
    "model.mup_base_d_model",
    "model.mup_base_head_dim",
)
# the model's shape: shown with the settings held fixed (None: the family's default)
SHAPE_KEYS = ("model.d_model", "model.n_layers", "model.n_heads", "model.n_kv_heads", "model.d_ff")


def design_line(runs: list[Run]) -> str:
    """ "Held fixed: data.source=kjv, ...; seeds: 0, 1, 2": the DESIGN_KEYS every run shares (a key
    that varies is an arm's or a size's setting and shows in the tables), and the seeds run."""
    fixed = []
    for key in DESIGN_KEYS:
        values = {repr(r.config.get(key)) for r in runs}
        if len(values) == 1 and runs[0].config.get(key) is not None:
            if key == "tokenizer.vocab_size" and runs[0].config.get("tokenizer.kind") == "byte":
                continue  # the byte tokenizer's size is fixed whatever this says
            fixed.append(code(f"{key}={_show(runs[0].config.get(key))}"))
    fixed += shape_items(runs)
    seeds = sorted({r.seed for r in runs}, key=lambda s: (str(type(s)), s))
    return f"Held fixed: {', '.join(fixed) or '–'}. Seeds: {', '.join(text(s) for s in seeds)}."


def shape_items(runs: list[Run]) -> list[str]:
    """The model's shape every run shares (d_model, layers, heads, KV heads, d_ff, and the
    vocabulary from the runs' tokenizer records): a key that varies is an arm's or a size's."""
    out = []
    for key in SHAPE_KEYS:
        if not any(key in r.config for r in runs):
            continue
        values = {repr(r.config.get(key)) for r in runs}
        if len(values) == 1:
            value = runs[0].config.get(key)
            if value is None and key == "model.d_ff":
                out += _d_ff_sized(runs)  # d_ff unset may still be sized by another key
                continue
            out.append(code(f"{key}={value}") if value is not None else f"{code(key)} at its default")
    vocab = {vocab_size(r) for r in runs if r.status == RunStatus.finished}
    (only,) = vocab if len(vocab) == 1 else (None,)
    if only is not None:
        out.append(f"vocabulary V = {int(only):,}")
    return out


# the keys that size d_ff when it is unset (zoo.config.schema.model): a d_ff at its default is none of them
D_FF_SIZING = ("model.ff_mult", "model.param_budget")
HELD_KEYS = (*DESIGN_KEYS, *SHAPE_KEYS, *D_FF_SIZING)  # the settings a "Held fixed" line may show


def _d_ff_sized(runs: list[Run]) -> list[str]:
    """The held-fixed item for an unset model.d_ff: the key that sizes it where every run shares
    one, nothing where one varies (an arm's or a size's setting), else "at its default"."""
    for key in D_FF_SIZING:
        values = {repr(r.config.get(key)) for r in runs}
        if values != {repr(None)}:
            return [code(f"{key}={_show(runs[0].config.get(key))}")] if len(values) == 1 else []
    return [f"{code('model.d_ff')} at its default"]


def held_settings(arms: list, tune: str | None = None) -> dict[str, Any]:
    """The settings the "Held fixed" line reads (DESIGN_KEYS, SHAPE_KEYS, D_FF_SIZING) that every
    run of `arms` has alike, at that value (None: at its default). comparison.json keeps them, so
    that a report rebuilt from runs.csv says what the one built from the run directories said.
    `tune`: the tuned key; the keys a joint one is made of (`zoo.compare.joint`) are never held
    (runs.csv keeps them in the joint column, so a rebuilt run has none of them alone)."""
    tuned = set(components(tune)) if tune and is_joint(tune) else set()
    runs = [run for arm in arms for run in arm.runs]
    held = {}
    for key in (k for k in HELD_KEYS if k not in tuned):
        if any(key in r.config for r in runs) and len({repr(r.config.get(key)) for r in runs}) == 1:
            held[key] = runs[0].config.get(key)
    return held


def held_from_line(line: str) -> dict[str, Any]:
    """The settings a "Held fixed" line (`design_line`) shows, at their values (None: at its
    default), in the order `held_settings` keeps them: what a report written before
    comparison.json kept them says of its runs. An unset model.d_ff sized by a key every run
    shares shows as that key alone, so model.d_ff is then unset too. The vocabulary is the
    runs' record, no setting."""
    shown: dict[str, Any] = {}
    for item, default in re.findall(r"`([^`]+)`( at its default)?", line.split(". Seeds:", 1)[0]):
        key, value = (item, None) if default else item.split("=", 1)
        if key not in HELD_KEYS:
            raise ValueError(f"{key}: not a setting a Held fixed line shows")
        shown[key] = cell_value(value) if value is not None else None
    if any(k in shown for k in D_FF_SIZING):
        shown.setdefault("model.d_ff", None)
    return {k: shown[k] for k in HELD_KEYS if k in shown}


def _span(values: list[float], fmt) -> str:
    low, high = min(values), max(values)
    return fmt(low) if high - low <= 1e-9 * max(abs(high), 1.0) else f"{fmt(low)}–{fmt(high)}"


def accounting_line(runs: list[Run]) -> str:
    """ "Training: N = ... non-embedding parameters, D = ... tokens (D/N = ...), ... epochs of the
    training split": the accounting of the finished runs, a range where it differs between them.
    N is the active parameters (a mixture of experts: those one token passes through), with the
    total beside it where a run holds more."""
    done = [r for r in runs if r.status == RunStatus.finished]
    pairs = [
        (
            number(r, "model", "active_non_embedding_params") or number(r, "model", "non_embedding_params"),
            number(r, "tokens_seen"),
        )
        for r in done
    ]
    totals = [number(r, "model", "non_embedding_params") for r in done]
    n, d = [nv for nv, _ in pairs if nv], [dv for _, dv in pairs if dv]
    if not n or not d:
        return "Training: the runs do not record their parameters and tokens."
    ratio = [dv / nv for nv, dv in pairs if nv and dv]
    seen = [e for e in (epochs(r) for r in done) if e is not None]
    total = ""
    if any(t and nv and t != nv for t, (nv, _) in zip(totals, pairs)):
        total = f" active (of {_span([t for t in totals if t], lambda v: f'{v:,.0f}')} in all)"
    text = (
        f"Training: N = {_span(n, lambda v: f'{v:,.0f}')} non-embedding parameters{total}, "
        f"D = {_span(d, lambda v: f'{v:,.0f}')} tokens (D/N = {_span(ratio, lambda v: f'{v:.3g}')})"
    )
    return text + (
        f", {_span(seen, lambda v: f'{v:.2f}')} epochs of the training split."
        if seen
        else "; the training split's size is not recorded (epochs unknown)."
    )


FLAG_SENTENCE = (
    "A difference whose seeds have zero spread, or with fewer than 2 seeds on a side, gets no "
    "interval and no p-value, and is flagged on its row and under Warnings."
)
RUNS_SENTENCE = (
    "Every run (its final metrics, N, D, compute and status) is in runs.csv beside this report; "
    "`zoo-compare recompute=DIR` rebuilds every interval from it."
)


def table_opening(family, runs: list[Run], head: list[str]) -> list[str]:
    """What a plain and a tuned report say between their method and their table: the multiplicity
    family (when there is one), the design, the accounting, and the table's header."""
    return [
        text(family.sentence()) if family else "",
        "",
        design_line(runs),
        "",
        accounting_line(runs),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]


def flag_warnings(diffs: list[tuple[str, Difference | None]]) -> list[str]:
    """One warning per difference without an interval because of its design: zero spread over
    the seeds, or fewer than 2 seeds on a side. Neither gets a p-value."""
    out = []
    for name, diff in diffs:
        if diff is None or not diff.flag:
            continue
        why = (
            "its seeds' values (or their differences from the baseline's) do not vary: a zero-width "
            "interval would claim certainty, so none is given"
            if diff.flag == ZERO_SPREAD
            else "a spread needs 2 or more seeds on each side"
        )
        out.append(f"{name}: {diff.flag} ({why}); no interval and no p-value")
    return out


def problem_lines(runs: list[Run], unreadable: list[Run]) -> list[str]:
    """The "Runs without a final result" section: every run that failed, is unfinished or is
    damaged (named by its sweep and its directory there, as runs.csv names it), with its error or
    its last validation; empty when there is none."""
    problems = [r for r in runs if r.status != RunStatus.finished] + unreadable
    if not problems:
        return []
    lines = ["", "## Runs without a final result", ""]
    for r in problems:
        detail = (
            f": {text(shown_error(r))}"
            if r.error
            else (
                f" (last validation {r.last_val['val/loss']:.4f} at {r.curve[-1][0]:,} tokens)"
                if r.curve and "val/loss" in r.last_val
                else ""
            )
        )
        lines.append(f"- {code('/'.join(run_place(r)))} {r.status.value}{detail}")  # no machine path
    return lines


def repeat_warnings(runs: list[Run]) -> list[str]:
    """One warning when finished runs read their training split more than once."""
    over = [e for e in (epochs(r) for r in runs if r.status == RunStatus.finished) if e is not None and e > 1.0]
    if not over:
        return []
    return [
        f"{len(over)} run(s) read their training split up to {max(over):.2f} times: later tokens repeat "
        f"earlier ones, so the validation loss mixes architecture with memorisation"
    ]


def few_seed_warnings(diffs: list[tuple[str, Difference | None]]) -> list[str]:
    """One warning per interval that rests on fewer than 2 degrees of freedom."""
    out = []
    for name, diff in diffs:
        if diff is not None and diff.few_df and diff.df is not None:
            out.append(
                f"{name}: its interval rests on {diff.df:.2g} degree of freedom (t quantile "
                f"{t_quantile(0.975, diff.df):.1f}; 2 seeds): its width depends on which seeds happen to "
                f"pair; run 3 or more seeds before drawing a conclusion"
            )
    return out
