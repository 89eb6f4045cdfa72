"""CPython's own help texts: `pydoc_data.topics.topics`, a dict from topic name (e.g.
"assert", "for", "typesbool") to its documentation as plain text. Shipped with every CPython, so
it is always available offline; about 80 documents, 0.5 M characters of technical English."""

from __future__ import annotations

from zoo.data.errors import DataError


def load_pydoc():
    """Dataset of topics sorted by name; columns text, topic."""
    from datasets import Dataset

    try:
        from pydoc_data.topics import topics
    except ImportError as exc:  # pragma: no cover - part of the standard library
        raise DataError("data.source=pydoc needs pydoc_data (part of CPython)") from exc
    names = sorted(topics)
    return Dataset.from_dict({"text": [topics[n].strip() for n in names], "topic": names})
