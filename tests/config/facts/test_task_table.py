"""The task table (`zoo.config.facts.tasks.TASK_SPECS`) agrees with what it describes: every task kind
has a row, a registered task class with the row's families, and a conf/task YAML file; every
family has one default task, the one its conf/model YAML files compose; a row's columns are
`DataConfig` fields and its specials tokenizer specials; and the data module, on a tiny local
corpus, batches each task as its row says (the collate function it names, the keys of the
batch, packed windows or padded rows, shifted labels); a bounded position table must hold the
validation's decoding where the row decodes in validation. A new task is checked here as soon as it
has a row."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
import torch
import yaml

import zoo
from zoo.config.errors import ConfigError
from zoo.config.facts.tasks import TASK_SPECS, Collate, TaskKind, families_of, task_of_family, task_spec
from zoo.config.schema.data import DataConfig
from zoo.config.schema.model import Family
from zoo.config.schema.validate import validate
from zoo.data import IGNORE_INDEX, DataError, MaskingCollator, ZooDataModule, collate_causal
from zoo.data.collate import collate_for
from zoo.data.collate.select import ClassificationCollate, Seq2SeqCollate
from zoo.data.packing import PackedBlocks
from zoo.data.specials import require_specials
from zoo.data.tokenizers import ByteTokenizer
from zoo.data.tokenizers.base import SPECIAL_IDS
from zoo.tasks import TASKS

CONF = Path(__file__).resolve().parents[3] / "conf"
KINDS = list(TaskKind)
MODEL_FILES = sorted((CONF / "model").glob("*.yaml"))
COLUMN_FIELDS = {f.name for f in fields(DataConfig) if f.name.endswith("_column")}
# what each Collate member names: a function, or the class of the picklable form bound to a tokenizer
COLLATES = {
    Collate.causal: collate_causal,
    Collate.masked: MaskingCollator,
    Collate.seq2seq: Seq2SeqCollate,
    Collate.classification: ClassificationCollate,
}
SEQ_LEN = 8


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_every_kind_has_a_row_a_task_class_and_a_task_file(kind):
    spec = TASK_SPECS[kind]
    assert spec.kind == kind and task_spec(kind.value) is spec
    assert TASKS[kind].kind == kind
    assert TASKS[kind].families == families_of(kind) == spec.families
    assert spec.families and len(set(spec.families)) == len(spec.families)
    task_file = yaml.safe_load((CONF / "task" / f"{kind.value}.yaml").read_text())
    assert task_file["kind"] == kind.value


def test_the_registry_and_the_task_files_hold_nothing_else():
    assert set(TASKS) == set(TASK_SPECS) == set(TaskKind)
    assert {p.stem for p in (CONF / "task").glob("*.yaml")} == {k.value for k in TaskKind}


def test_an_unknown_task_is_refused_on_one_line():
    with pytest.raises(ConfigError, match="task='lm' is not allowed; choose one of: causal_lm"):
        task_spec("lm")


@pytest.mark.parametrize("family", list(Family), ids=str)
def test_every_family_has_one_default_task_that_it_can_train(family):
    defaults = [spec.kind for spec in TASK_SPECS.values() if family in spec.default_for]
    assert defaults == [task_of_family(family)]
    assert family in families_of(task_of_family(family.value))


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_a_model_file_composes_its_family_default_task(path):
    model = yaml.safe_load(path.read_text())
    tasks = [
        entry["/task@_global_.task"]
        for entry in model["defaults"]
        if isinstance(entry, dict) and "/task@_global_.task" in entry
    ]
    assert tasks == [task_of_family(model["family"]).value]


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_a_bounded_scheme_must_hold_validation_decoding_where_the_row_decodes(kind):
    spec = TASK_SPECS[kind]
    fits = [
        f"task={kind.value}",
        f"model.family={spec.families[0].value}",
        "model/position=learned",
        "model.max_seq_len=16",
        "data.seq_len=8",
        "task.generate_max_tokens=15",
    ]
    validate(zoo.compose(fits))
    past = zoo.compose(fits[:-1] + ["task.generate_max_tokens=16"])
    if spec.decodes_in_validation:
        with pytest.raises(
            ConfigError,
            match=r"task.generate_max_tokens \(16\) plus BOS is longer than learned "
            r"positions allow \(model.max_seq_len=16\)",
        ):
            validate(past)
    else:
        validate(past)


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_columns_and_specials_are_what_the_data_has(kind):
    spec = TASK_SPECS[kind]
    assert set(spec.columns) <= COLUMN_FIELDS and spec.text_columns
    assert spec.specials and {s.name for s in spec.specials} <= set(SPECIAL_IDS)
    assert len(spec.batch) == len(set(spec.batch)) and {"input_ids", "labels"} <= set(spec.batch)


class _Lacking(ByteTokenizer):
    """The byte tokenizer without one special token."""

    def __init__(self, missing: str):
        super().__init__()
        self.missing = missing

    def special_ids(self):
        return {**super().special_ids(), self.missing: None}


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_each_needed_special_is_refused_with_its_reason(kind):
    require_specials(ByteTokenizer(), kind)
    for special in TASK_SPECS[kind].specials:
        with pytest.raises(
            DataError,
            match=rf"task={kind.value} needs an? {special.name} token "
            rf"\({special.why}\), but the byte tokenizer has none",
        ):
            require_specials(_Lacking(special.name), kind)


@pytest.mark.parametrize("collate", list(Collate), ids=str)
def test_collate_for_every_name(collate):
    _assert_named(collate_for(collate, ByteTokenizer(), mlm_probability=0.15, seed=0, train=True), collate)


def _assert_named(fn, collate: Collate) -> None:
    expected = COLLATES[collate]
    assert fn is expected or (isinstance(expected, type) and isinstance(fn, expected))


def _corpus(directory: Path) -> dict:
    """A local corpus with every column a task reads (text, target, label), train and validation."""
    words = ["light", "darkness", "water", "earth", "heaven", "seed", "fruit", "day", "night"]

    def write(name: str, n: int, offset: int) -> str:
        rows = [
            {
                "text": " ".join(words[(i + j) % len(words)] for j in range(3 + i % 4)),
                "target": " ".join(reversed(words[i % len(words)])),
                "label": ["old", "new"][i % 2],
            }
            for i in range(offset, offset + n)
        ]
        path = directory / name
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        return str(path)

    return {
        "source": "local",
        "path": write("train.jsonl", 24, 0),
        "val_path": write("val.jsonl", 8, 24),
        "seq_len": SEQ_LEN,
        "global_batch_size": 4,
        "num_proc": 1,
        "cache_dir": str(directory / "cache"),
    }


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_the_data_module_batches_each_task_as_its_row_says(kind, tmp_path):
    spec = TASK_SPECS[kind]
    dm = ZooDataModule(_corpus(tmp_path), {"kind": "byte"}, kind.value)
    dm.prepare_data()
    dm.setup("fit")
    _assert_named(dm.train_dataloader().collate_fn, spec.collate)
    batch = next(iter(dm.train_dataloader()))
    assert set(batch) == set(spec.batch)
    assert all(t.dtype == torch.long for t in batch.values())
    x, y = batch["input_ids"], batch["labels"]
    assert x.shape[0] == y.shape[0] == 4
    if spec.packs:  # fixed windows of the concatenated documents, no padding
        assert isinstance(dm.train_dataset, PackedBlocks)
        assert len(dm.train_dataset[0]) == spec.window(SEQ_LEN) and x.shape == y.shape == (4, SEQ_LEN)
    else:  # one example per row, cut to seq_len, padded to the longest
        assert batch["attention_mask"].shape == x.shape and x.shape[1] <= SEQ_LEN
    decoder_inputs = batch.get("decoder_input_ids", x)
    if spec.shifted:  # position t predicts token t+1
        real = y[:, :-1] != IGNORE_INDEX
        assert torch.equal(y[:, :-1][real], decoder_inputs[:, 1:][real])
    elif y.shape == x.shape:  # predicted in place: targets only where the collator chose, masked there
        chosen = y != IGNORE_INDEX
        assert chosen.any() and (~chosen).any()
        assert (x[chosen] == dm.tokenizer.mask_id).any() and not (x[~chosen] == dm.tokenizer.mask_id).any()
    else:  # one label per example
        assert y.shape == (4,)


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_the_data_module_needs_each_column_of_the_row(kind, tmp_path):
    corpus = _corpus(tmp_path)
    for field in TASK_SPECS[kind].columns:
        dm = ZooDataModule({**corpus, field: "absent"}, {"kind": "byte"}, kind.value)
        with pytest.raises(DataError, match=rf"data.{field}='absent' is not a column of the train split"):
            dm.setup()


def test_only_a_next_token_task_generates():
    """zoo-generate's refusal and the run summary's sample follow the row's `generates`; a row
    that generates without shifted labels cannot be written."""
    assert [k.value for k, s in TASK_SPECS.items() if s.generates] == ["causal_lm", "seq2seq"]
    row = TASK_SPECS[TaskKind.masked_lm]
    with pytest.raises(ValueError, match="only a task that predicts the next token generates"):
        type(row)(**{**{f.name: getattr(row, f.name) for f in fields(row)}, "generates": True})
