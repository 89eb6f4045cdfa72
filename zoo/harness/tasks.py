"""The built-in offline tasks: harness task definitions (YAML in `task_configs/`, the harness's
own format) over JSONL files that zoo makes from its built-in corpora, so that any checkpoint
has task scores without the Hugging Face Hub.

- `kjv_cloze` (loglikelihood): the last word of a verse after the rest of it, LAMBADA's form;
  acc (greedy decoding gives the word) and perplexity.
- `kjv_next_verse` (multiple choice): a verse, then its true next verse among three other
  verses of the validation split; acc and acc_norm.
- `numbers_translation` (generate_until): an English number phrase to Spanish, exact match; the
  task of a `data=numbers task=seq2seq` run.

Each is made from the validation split that the corpus's run holds out at zoo's defaults
(`data.val_fraction` 0.05, `data.split_seed` 0, `zoo.data.split`): the first EXAMPLES examples
that qualify, in the split's order, with distractors drawn by a fixed seed. Deterministic: the
same files on every machine. `materialize` writes the files and the YAMLs (their `data_files`
pointing at them) into one directory of zoo's cache, named by a digest of what it holds;
`lm_eval --include_path DIR` finds the same tasks.

The harness runs what a task YAML says (a `!function` imports a Python file beside it, a Jinja
template is code), so the directory is checked each time before the harness reads it: it holds
exactly the files zoo wrote, plain files, each YAML equal to the text zoo writes for it and each
data file to the SHA-256 in the directory's manifest (`MANIFEST`, written by zoo). Anything else
(a file changed, added or linked) is said on one line and the directory is built again."""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from zoo.config.records.atomic import umask, write_text
from zoo.data.cache import cache_root, exclusive
from zoo.data.corpora.kjv import kjv_verses, load_kjv
from zoo.data.corpora.numbers import load_numbers
from zoo.data.errors import DataError
from zoo.data.integrity import discard, file_digest, notice
from zoo.data.split import split_train_val

EXAMPLES = 200  # per task: small enough to score on a CPU in seconds, large enough to rank arms
VAL_FRACTION = 0.05  # DataConfig's default: the split a default run validates on
SPLIT_SEED = 0  # DataConfig's default data.split_seed
CHOICES = 4  # kjv_next_verse: the true verse and three distractors
VERSION = 1  # part of the directory's digest: a change to how the files are made makes new ones
_WORD = re.compile(r"^(.*?)([^\w]*)$")  # a word and the punctuation after it


def _validation(dataset):
    return split_train_val(dataset, VAL_FRACTION, SPLIT_SEED)["validation"]


def kjv_cloze() -> list[dict]:
    """{context, target}: a verse of 8 words or more without its last word; target " word"
    (the punctuation after it dropped)."""
    rows = []
    for text in _validation(load_kjv())["text"]:
        words = text.split()
        if len(words) < 8:
            continue
        match = _WORD.match(words[-1])
        assert match is not None  # both of its groups may be empty: it matches every word
        word = match.group(1)
        if not word.isalpha():
            continue
        rows.append({"context": " ".join(words[:-1]), "target": f" {word}"})
        if len(rows) == EXAMPLES:
            break
    return rows


def kjv_next_verse() -> list[dict]:
    """{context, choices, label}: a validation verse, then its next verse (same chapter) and
    CHOICES - 1 other validation verses in an order drawn by a fixed seed."""
    verses = kjv_verses()
    place = {(b, c, v): i for i, (b, c, v) in enumerate(zip(verses.book_numbers, verses.chapters, verses.verses))}
    val = _validation(load_kjv())
    texts = list(val["text"])
    rng = random.Random(SPLIT_SEED)
    rows = []
    for text, book, chapter, verse in zip(texts, val["book"], val["chapter"], val["verse"]):
        number = verses.book_numbers[verses.books.index(book)]
        following = place.get((number, chapter, verse + 1))
        if following is None:
            continue
        truth = verses.texts[following]
        others = [t for t in rng.sample(texts, CHOICES + 2) if t not in (text, truth)][: CHOICES - 1]
        choices = others + [truth]
        rng.shuffle(choices)
        rows.append({"context": text, "choices": choices, "label": choices.index(truth)})
        if len(rows) == EXAMPLES:
            break
    return rows


def numbers_translation() -> list[dict]:
    """{source, target}: English and Spanish phrases of the numbers corpus's validation split."""
    val = _validation(load_numbers())
    return [{"source": s, "target": t} for s, t in zip(val["source"][:EXAMPLES], val["target"][:EXAMPLES])]


BUILDERS: dict[str, Callable[[], list[dict]]] = {
    "kjv_cloze": kjv_cloze,
    "kjv_next_verse": kjv_next_verse,
    "numbers_translation": numbers_translation,
}
BUILT_IN = tuple(BUILDERS)


def _yaml_text(name: str) -> str:
    return resources.files("zoo.harness").joinpath("task_configs").joinpath(f"{name}.yaml").read_text(encoding="utf-8")


MANIFEST = "zoo-manifest.json"  # {"version": VERSION, "files": {name: sha256}}, written by zoo


def materialize(names: list[str] | None = None, cache_dir: str | None = None) -> Path:
    """The directory holding the built-in tasks `names` (default: all): for each, NAME.jsonl
    and NAME.yaml (data_files the JSONL's absolute path). Made once and reused while it holds
    exactly what zoo wrote (`_problem`); written whole under a temporary name and then renamed,
    so a reader never sees half of it."""
    names = sorted(names or BUILT_IN)
    digest = hashlib.sha256(json.dumps([VERSION, names, [_yaml_text(n) for n in names]]).encode()).hexdigest()[:16]
    root = cache_root(cache_dir) / "harness"
    target = root / f"tasks-{digest}"
    if _problem(target, names) is None:  # entries appear whole (renamed in): no lock to read one
        return target
    try:
        with exclusive(root / f"tasks-{digest}.lock"):
            problem = _problem(target, names)
            if problem is None:
                return target
            if target.is_symlink() or target.exists():
                notice(f"the harness task cache {target}: {problem}; building it again")
                discard(target, "the harness task cache", "ZOO_CACHE")
            _build(target, names)
    except OSError as exc:
        raise DataError(
            f"the harness task cache {root} cannot be written ({exc.strerror or exc}); point ZOO_CACHE "
            f"at a writable directory"
        ) from None
    return target


def _task_yaml(name: str, target: Path) -> str:
    """NAME.yaml as zoo writes it into `target`: the packaged text, its data file made absolute."""
    return _yaml_text(name).replace(f"validation: {name}.jsonl", f"validation: {target / f'{name}.jsonl'}")


def _build(target: Path, names: list[str]) -> None:
    """The task files of `names` and their manifest, written into a new directory renamed to
    `target` (with the umask's permissions: mkdtemp makes it 0700, and a team shares its cache)."""
    import os
    import tempfile

    work = Path(tempfile.mkdtemp(prefix=".tasks-", dir=target.parent))
    os.chmod(work, 0o777 & ~umask())
    files = {}
    for name in names:
        data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in BUILDERS[name]())
        write_text(work / f"{name}.jsonl", data)
        files[f"{name}.jsonl"] = file_digest(work / f"{name}.jsonl")
        write_text(work / f"{name}.yaml", _task_yaml(name, target))
        files[f"{name}.yaml"] = file_digest(work / f"{name}.yaml")
    write_text(work / MANIFEST, json.dumps({"version": VERSION, "files": files}, indent=2) + "\n")
    os.replace(work, target)


def _problem(target: Path, names: list[str]) -> str | None:
    """What keeps the harness from reading `target` (None: it holds exactly what zoo wrote)."""
    if target.is_symlink():
        return "it is a link"
    if not target.is_dir():
        return "missing"
    try:
        manifest = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
        recorded = manifest["files"]
    except FileNotFoundError:
        return f"it has no {MANIFEST}, so its files cannot be checked"
    except (OSError, ValueError, KeyError, TypeError):
        return f"its {MANIFEST} cannot be read"
    expected = {f"{n}.{kind}" for n in names for kind in ("jsonl", "yaml")}
    if not isinstance(recorded, dict) or set(recorded) != expected or manifest.get("version") != VERSION:
        return f"its {MANIFEST} does not list the files zoo writes"
    present = {p.relative_to(target).as_posix(): p for p in target.rglob("*")}
    for name, path in sorted(present.items()):
        if path.is_symlink():
            return f"{name} is a link"
        if name != MANIFEST and name not in expected:
            return f"it holds {name}, which zoo did not write"
    for name in sorted(expected):
        if name not in present:
            return f"{name} is missing"
        if file_digest(present[name]) != recorded[name]:
            return f"{name} does not match the digest recorded when it was written"
    for name in names:
        if (target / f"{name}.yaml").read_text(encoding="utf-8") != _task_yaml(name, target):
            return f"{name}.yaml is not the task zoo writes"
    return None
