"""How a report names an arm's layer pattern: `model.layer_pattern` and, over a recurrent
`model.attention`, `model.global_every`, shown compactly instead of as their raw values.

A pattern of k layers of one kind then one of another reads as the papers write a hybrid,
"gated_deltanet 3:1 full" (Qwen3-Next's `[gated_deltanet, gated_deltanet, gated_deltanet, full]`,
and `model.attention=gated_deltanet model.global_every=4`, the same stack); a pattern of one
entry by its kind ("gated_deltanet": every layer that kind); any other by the kinds' initials as
written ("GSGF" for `[gated_deltanet, sliding, gated_deltanet, full]`, `INITIALS`). The three forms
cannot meet (a ratio has spaces, a kind is lower case, initials are upper case and at least two),
and within each form two patterns that differ have names that differ, so two arms are never
shown alike; a value that is none of these (a kind this version does not know) is shown whole.
runs.csv and comparison.json keep the value itself (`zoo.compare.table`)."""

from __future__ import annotations

from typing import Any

from zoo.compare.design import _show
from zoo.config.facts.attention import AttentionKind, is_recurrent

PATTERN = "model.layer_pattern"
EVERY = "model.global_every"
ATTENTION = "model.attention"
# each kind's letter in a pattern named by initials: its first letter, upper case (a test holds
# them distinct; a kind whose initial another has needs its own letter here)
INITIALS = {kind: kind.value[0].upper() for kind in AttentionKind}


def _kinds(value: Any) -> list[AttentionKind] | None:
    """A layer pattern's kinds: from the list a run's config holds, or from the text runs.csv
    keeps of it (`['gated_deltanet', 'full']`, read as YAML: data, never code); None when it is
    no list of known kinds."""
    if isinstance(value, str):
        import yaml

        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError:
            return None
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(k, str) for k in value):
        return None
    known = {kind.value: kind for kind in AttentionKind}
    return [known[k] for k in value] if all(k in known for k in value) else None


def pattern_name(kinds: list[AttentionKind]) -> str:
    """A pattern of layer kinds named: "A k:1 B" for k layers of A then one of B, the kind alone
    for a pattern of one entry, else the kinds' initials as written ("GSGF")."""
    head, last = kinds[:-1], kinds[-1]
    if len(kinds) == 1:
        return last.value
    if len(set(head)) == 1 and head[0] != last:
        return f"{head[0].value} {len(head)}:1 {last.value}"
    return "".join(INITIALS[kind] for kind in kinds)


def arm_setting(config: dict[str, Any], key: str) -> str:
    """The value of `key` an arm with `config` (flattened, dotted keys) is named by: its layer
    pattern named (`pattern_name`), model.global_every=k over a recurrent model.attention as the
    pattern it makes (k - 1 recurrent layers then a full one), any other setting as its text."""
    value = config.get(key)
    if key == PATTERN:
        kinds = _kinds(value)
        return pattern_name(kinds) if kinds is not None else _show(value)
    if key == EVERY and isinstance(value, int) and not isinstance(value, bool) and value > 1:
        attention = str(getattr(config.get(ATTENTION), "value", config.get(ATTENTION)))
        kind = {k.value: k for k in AttentionKind}.get(attention)
        if kind is not None and is_recurrent(kind):
            return pattern_name([kind] * (value - 1) + [AttentionKind.full])
    return _show(value)
