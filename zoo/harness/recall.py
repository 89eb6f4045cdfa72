"""The associative-recall probe's score (MQAR, `zoo.config.schema.recall`): a causal LM's
accuracy at the query positions of sequences drawn by `zoo.data.recall`, by number of pairs and
by distance from each key to its query, each with a 95% interval.

A query is answered when the model's most likely next id, over its whole vocabulary, at the
query key is the id of that key's value (Zoology's accuracy). The interval is a percentile
bootstrap over sequences (`RESAMPLES` resamples, seeded): the queries of one sequence share a
context, so sequences, not queries, are the independent draws. Distances are binned by powers
of two, [2, 4), [4, 8), ...: the bins show where recall fails as the key recedes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import torch

from zoo.config.errors import ConfigError
from zoo.config.schema.recall import RecallSpec
from zoo.data.recall import RecallSet, alphabet, draw

RESAMPLES = 1000  # bootstrap resamples of each interval
LEVEL = 0.95  # the intervals' coverage


def symbol_ids(tokenizer, spec: RecallSpec) -> np.ndarray:
    """[vocab_size]: the token id of each symbol; ConfigError (one line) unless the tokenizer
    gives every symbol one id of its own (a run trained on data=recall with tokenizer=char)."""
    ids = tokenizer.encode(alphabet(spec))
    unk = getattr(tokenizer, "unk_id", None)
    if len(ids) != spec.vocab_size or len(set(ids)) != spec.vocab_size or unk in ids:
        raise ConfigError(
            f"probe=recall needs one token of its own for each of the {spec.vocab_size} symbols; the "
            f"checkpoint's {tokenizer.kind} tokenizer does not give them (train with data=recall tokenizer=char)"
        )
    return np.asarray(ids, dtype=np.int64)


@torch.no_grad()
def answers(model, ids: np.ndarray, drawn: RecallSet, batch_size: int, device: torch.device) -> np.ndarray:
    """[n, N] bool: whether the model's argmax at each query is its value's id. `model(input_ids)`
    returns an object with `.logits` [B, T, V], as zoo's decoders do."""
    inputs = torch.from_numpy(ids[drawn.symbols])  # (n, L) token ids
    want = torch.from_numpy(ids[drawn.values])  # (n, N)
    at = torch.from_numpy(drawn.queries)  # (n, N)
    out = []
    for start in range(0, len(inputs), batch_size):
        x = inputs[start : start + batch_size].to(device)  # (B, L)
        logits = model(x).logits  # (B, L, V)
        picked = logits.argmax(-1).cpu()  # (B, L)
        out.append(picked.gather(1, at[start : start + batch_size]) == want[start : start + batch_size])
    return torch.cat(out).numpy()


def interval(correct: np.ndarray, total: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """A percentile bootstrap interval (LEVEL) of sum(correct) / sum(total) over sequences
    ([n] each), resampling sequences; sequences with no query in a bin count as drawn."""
    n = len(correct)
    pick = rng.integers(0, n, size=(RESAMPLES, n))  # (R, n)
    hits, queries = correct[pick].sum(1), total[pick].sum(1)  # (R,) each
    rates = hits[queries > 0] / queries[queries > 0]
    if len(rates) == 0:
        return 0.0, 1.0
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(rates, [tail, 100 - tail])
    return float(low), float(high)


def bins(distances: np.ndarray) -> list[tuple[int, int]]:
    """[low, high) bins by powers of two covering `distances` (each >= 2)."""
    top = int(distances.max())
    out, low = [], 2
    while low <= top:
        out.append((low, 2 * low))
        low *= 2
    return out


def _row(pairs: int, where: str, correct: np.ndarray, total: np.ndarray, rng: np.random.Generator) -> dict:
    queries, hits = int(total.sum()), int(correct.sum())
    low, high = interval(correct, total, rng)
    return {
        "pairs": pairs,
        "distance": where,
        "queries": queries,
        "correct": hits,
        "accuracy": hits / queries if queries else None,
        "low": low,
        "high": high,
    }


def score(
    model,
    ids: np.ndarray,
    spec: RecallSpec,
    pairs: Sequence[int],
    *,
    examples: int,
    seed: int,
    batch_size: int = 32,
    device: torch.device | str = "cpu",
) -> dict:
    """The probe on `model` (in eval mode) at each pair count of `pairs`: `examples` sequences
    of `spec` with that many pairs each (seed `seed`), scored at every query. Rows: one "all"
    row per pair count, then one per distance bin."""
    rows = []
    rng = np.random.default_rng(seed)
    for n_pairs in pairs:
        one = replace(spec, num_kv_pairs=n_pairs)
        drawn = draw(one, examples, seed)
        hit = answers(model, ids, drawn, batch_size, torch.device(device)).astype(np.int64)  # (n, N)
        rows.append(_row(n_pairs, "all", hit.sum(1), np.full(examples, n_pairs), rng))
        dist = drawn.distances
        for low, high in bins(dist):
            inside = (dist >= low) & (dist < high)  # (n, N)
            if not inside.any():
                continue
            rows.append(_row(n_pairs, f"{low}-{high - 1}", (hit * inside).sum(1), inside.sum(1), rng))
    return {
        "probe": "recall",
        "layout": "MQAR (Zoology): pairs, then queries each followed by its value; argmax over the vocabulary",
        "vocab_size": spec.vocab_size,
        "seq_len": spec.seq_len,
        "power_a": spec.power_a,
        "examples": examples,
        "seed": seed,
        "chance": spec.chance,
        "interval": f"{LEVEL:.0%} percentile bootstrap over sequences, {RESAMPLES} resamples",
        "rows": rows,
    }


def check_pairs(text: str | int | None, default: int, spec: RecallSpec, key: str = "pairs") -> list[int]:
    """`pairs=` of zoo-eval: a pair count or a comma-separated list of them (default: the run's);
    each checked against the spec on one line."""
    if text is None:
        return [default]
    parts = [text] if isinstance(text, int) else [p.strip() for p in str(text).split(",")]
    out = []
    for part in parts:
        if isinstance(part, bool) or not str(part).isdigit() or int(part) < 1:
            raise ConfigError(f"{key} must be pair counts >= 1, separated by commas, got {text!r}")
        out.append(int(part))
    keys = {**spec.keys, "num_kv_pairs": key}
    for n in out:
        RecallSpec(vocab_size=spec.vocab_size, seq_len=spec.seq_len, num_kv_pairs=n, power_a=spec.power_a, keys=keys)
    return out


def table(result: dict) -> str:
    """The rows as a text table, under a line saying what was measured."""
    head = (
        f"recall (MQAR): {result['vocab_size']} symbols, {result['seq_len']} per sequence, "
        f"{result['examples']} sequences per pair count, chance {result['chance']:.4f}; "
        f"{result['interval']}"
    )
    lines = [head, f"{'pairs':>5}  {'distance':>9}  {'queries':>7}  {'accuracy':>8}  interval"]
    for r in result["rows"]:
        acc = "-" if r["accuracy"] is None else f"{r['accuracy']:.4f}"
        lines.append(
            f"{r['pairs']:>5}  {r['distance']:>9}  {r['queries']:>7}  {acc:>8}  [{r['low']:.4f}, {r['high']:.4f}]"
        )
    return "\n".join(lines)


CSV_COLUMNS = ("pairs", "distance", "queries", "correct", "accuracy", "low", "high")


def csv_text(result: dict) -> str:
    """The rows as CSV, one header line."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in result["rows"]:
        writer.writerow({k: r[k] for k in CSV_COLUMNS})
    return out.getvalue()
