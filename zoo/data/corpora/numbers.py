"""English -> Spanish number phrases from `num2words`, a small translation task with an exact
answer: 121 -> ("one hundred twenty-one", "ciento veintiuno").

The English phrases drop num2words' British "and" ("one hundred and twenty-one") for the
American form. Every n gives a different pair, so any split by n keeps validation phrases out of
training: the datamodule's seeded split (`zoo.data.split`) is the held-out split.
"""

from __future__ import annotations

from zoo.data.errors import DataError


def english(n: int) -> str:
    return _num2words()(n, lang="en").replace(" and ", " ").replace(",", "")


def spanish(n: int) -> str:
    return _num2words()(n, lang="es")


def load_numbers(num_pairs: int = 10000):
    """Dataset of pairs for n = 0 .. num_pairs-1 in order; columns source, target, n."""
    from datasets import Dataset

    ns = list(range(num_pairs))
    return Dataset.from_dict(
        {
            "source": [english(n) for n in ns],
            "target": [spanish(n) for n in ns],
            "n": ns,
        }
    )


def _num2words():
    try:
        from num2words import num2words
    except ImportError as exc:
        raise DataError("data.source=numbers needs num2words: pip install num2words") from exc
    return num2words
