"""What a report copies from runs (config keys and values, paths, errors, warnings) is data,
never markup: code spans that no backtick, pipe or line break in the value can end or split,
text with its HTML and line breaks made inert, and CSV cells that a spreadsheet will not run as a
formula."""

from __future__ import annotations

import html
import re
from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def inline(value: Any) -> str:
    """One line: control characters (line breaks, tabs, escapes) shown as their escapes."""
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group())[1:-1], str(value))


def code(value: Any) -> str:
    """`value` as a markdown code span fit for a table cell: fenced by more backticks than any
    run inside it, pipes escaped (GitHub tables split on them even in code), on one line.
    Markdown shows a code span's HTML as text."""
    text = inline(value).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def text(value: Any) -> str:
    """`value` as markdown text on one line: HTML made inert, and the characters that would
    start markup (links, emphasis, table cells) escaped. An underscore inside a word starts no
    emphasis (CommonMark), so a key such as `model.d_model` reads as it is written."""
    out = html.escape(inline(value), quote=False)
    out = re.sub(r"([\\`*\[\]|])", r"\\\1", out)
    return re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", out)


def csv_cell(value: Any) -> Any:
    """A text cell that starts like a formula (=, +, -, @, tab, CR) gets a leading quote, as
    spreadsheets document for literal text; numbers and empty cells are left as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value
