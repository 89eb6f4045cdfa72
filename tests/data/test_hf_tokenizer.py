"""Tokenizer kind hf: a Hugging Face tokenizer directory behind zoo's Tokenizer interface. Its
ids are the HF tokenizer's own (the tiny tokenizer here puts its specials at 316.., where no
zoo kind has them), encode/decode are HF's, a run directory rebuilds it offline, and a task
that needs a special token the tokenizer lacks is refused naming it."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
import torch
import transformers  # noqa: F401  (a test dependency: missing, these tests fail rather than skip)

from tests.interop.tiny_hf import save_tokenizer  # noqa: E402
from zoo.cli.refusals import refusal  # noqa: E402
from zoo.config.errors import ConfigError  # noqa: E402
from zoo.config.schema.data import TokenizerConfig  # noqa: E402
from zoo.data import IGNORE_INDEX, DataError, MaskingCollator, build_datamodule, build_tokenizer, load_tokenizer  # noqa: E402
from zoo.data.specials import require_specials  # noqa: E402
from zoo.data.tokenizers import HFTokenizer, Tokenizer  # noqa: E402
from zoo.data.tokenizers.state import tokenizer_from_state, tokenizer_state  # noqa: E402

TEXTS = [
    "And God said, Let there be light: and there was light.",
    "  def f(x):\n\treturn {'naïve': x ** 2}  # café ☕\n",
    "",
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(directory, transformers tokenizer): bos 316, eos 317, unk 318, pad 319, mask 320."""
    directory = tmp_path_factory.mktemp("hf-tokenizer")
    return directory, save_tokenizer(directory, mask_token="<mask>")


def _build(directory) -> Tokenizer:
    return build_tokenizer(TokenizerConfig(kind="hf", path=str(directory)))


def test_encode_and_decode_are_the_hf_tokenizers_without_special_tokens(saved):
    directory, hf = saved
    tok = _build(directory)
    assert isinstance(tok, HFTokenizer) and tok.kind == "hf" and tok.vocab_size == len(hf) == 321
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids == hf.encode(text, add_special_tokens=False)
        assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=True) == text  # byte-level BPE: exact
        assert tok.decode([tok.bos_id, *ids, tok.eos_id, tok.pad_id, tok.pad_id]) == text  # specials dropped
    assert tok.encode_batch(TEXTS) == [tok.encode(t) for t in TEXTS]
    assert tok.decode([5, 10_000, 6]) == hf.decode([5, 6])  # ids past the vocabulary are skipped


def test_special_ids_are_read_from_the_hf_tokenizer(saved, tmp_path):
    directory, hf = saved
    tok = _build(directory)
    expected = {
        "pad": hf.pad_token_id,
        "unk": hf.unk_token_id,
        "bos": hf.bos_token_id,
        "eos": hf.eos_token_id,
        "mask": hf.mask_token_id,
        "cls": hf.bos_token_id,
    }  # cls: else bos
    assert tok.special_ids() == expected == {"pad": 319, "unk": 318, "bos": 316, "eos": 317, "mask": 320, "cls": 316}
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id, tok.mask_id, tok.cls_id) == (319, 318, 316, 317, 320, 316)

    # GPT-2 style: one <|endoftext|> for bos / eos / unk and no pad: pad is eos, mask is missing
    gpt2 = save_tokenizer(
        tmp_path / "gpt2",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        pad_token=None,
    )
    end = gpt2.eos_token_id
    assert _build(tmp_path / "gpt2").special_ids() == {
        "pad": end,
        "unk": end,
        "bos": end,
        "eos": end,
        "mask": None,
        "cls": end,
    }
    # BERT style: [SEP] ends a segment (eos), [CLS] is cls, no bos
    bert = save_tokenizer(
        tmp_path / "bert",
        bos_token=None,
        eos_token=None,
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        pad_token="[PAD]",
        unk_token="[UNK]",
    )
    ids = _build(tmp_path / "bert").special_ids()
    assert (ids["eos"], ids["cls"], ids["bos"], ids["mask"]) == (
        bert.sep_token_id,
        bert.cls_token_id,
        None,
        bert.mask_token_id,
    )
    # T5 style: no bos; the model config beside the tokenizer starts the decoder with pad
    t5 = save_tokenizer(tmp_path / "t5", bos_token=None)
    assert _build(tmp_path / "t5").bos_id is None
    (tmp_path / "t5" / "config.json").write_text(json.dumps({"decoder_start_token_id": t5.pad_token_id}))
    ids = _build(tmp_path / "t5").special_ids()
    assert ids["bos"] == t5.pad_token_id and ids["cls"] is None


def test_a_run_directory_rebuilds_it_offline(saved, tmp_path):
    directory, _ = saved
    copy = tmp_path / "downloaded"
    shutil.copytree(directory, copy)
    tok = _build(copy)
    run_tokenizer = tok.save(tmp_path / "run" / "tokenizer")
    shutil.rmtree(copy)  # the run directory alone must do
    assert json.loads((run_tokenizer / "tokenizer.json").read_text())["kind"] == "hf"
    assert (run_tokenizer / "hf" / "tokenizer.json").is_file()  # the HF files, beside zoo's meta file
    again = load_tokenizer(run_tokenizer)
    assert isinstance(again, HFTokenizer) and again.vocab_size == tok.vocab_size
    assert again.special_ids() == tok.special_ids() and again.fingerprint() == tok.fingerprint()
    assert [again.encode(t) for t in TEXTS] == [tok.encode(t) for t in TEXTS]
    in_checkpoint = tokenizer_from_state(tokenizer_state(tok))  # how a checkpoint carries it
    assert in_checkpoint.special_ids() == tok.special_ids() and in_checkpoint.encode(TEXTS[1]) == tok.encode(TEXTS[1])


def test_the_fingerprint_follows_the_vocabulary(saved, tmp_path):
    directory, _ = saved
    tok = _build(directory)
    assert _build(directory).fingerprint() == tok.fingerprint()
    save_tokenizer(tmp_path / "smaller", vocab_size=300, mask_token="<mask>")
    assert _build(tmp_path / "smaller").fingerprint() != tok.fingerprint()


def test_bad_settings_are_refused_on_one_line(saved, tmp_path):
    with pytest.raises(ConfigError, match="tokenizer=hf needs tokenizer.path"):
        TokenizerConfig(kind="hf")
    assert "tokenizer.path only applies to tokenizer=hf, not byte" == refusal(["tokenizer=byte", "tokenizer.path=x"])
    assert refusal(["tokenizer=hf"]).startswith("tokenizer=hf needs tokenizer.path")
    assert "only applies to tokenizer=sentencepiece" in refusal(
        ["tokenizer=hf", "tokenizer.path=x", "tokenizer.vocab_size=100"]
    )
    with pytest.raises(DataError, match="no such directory"):
        _build(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no Hugging Face tokenizer could be loaded") as info:
        _build(tmp_path / "empty")
    assert "\n" not in str(info.value)


def test_a_model_directory_without_tokenizer_files_is_refused_not_read_as_an_empty_vocabulary(tmp_path):
    """transformers builds a model's tokenizer class from config.json alone, with no vocabulary
    (every text encodes to no ids): a zoo-export directory of a run on zoo's own tokenizer is
    one (its tokenizer is in zoo_tokenizer/), and training on it read every document as eos."""
    transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=300).save_pretrained(tmp_path)
    (tmp_path / "zoo_tokenizer").mkdir()
    with pytest.raises(DataError) as info:
        _build(tmp_path)
    assert str(info.value) == (
        f"tokenizer.path={tmp_path}: no Hugging Face tokenizer files there (transformers made a GPT2Tokenizer "
        "with an empty vocabulary from config.json alone; zoo_tokenizer/ there is zoo's own, which "
        "transformers cannot read); give a directory holding a tokenizer's files"
    )


def test_without_transformers_the_extra_to_install_is_named(saved, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now fails
    with pytest.raises(
        ConfigError,
        match=r"^tokenizer=hf needs transformers: install the hf extra, "
        r"pip install '\.\[hf\]' in zoo's source directory$",
    ):
        _build(saved[0])


def test_masking_never_picks_or_draws_the_tokenizers_special_ids(saved):
    tok = _build(saved[0])
    V, specials = tok.vocab_size, [i for i in tok.special_ids().values() if i is not None]
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 316, (64, 256), generator=g)
    ids[:, ::7] = tok.eos_id
    ids[:, 3::11] = tok.pad_id
    batch = MaskingCollator(V, probability=0.3, mask_id=tok.mask_id, special_ids=specials)(list(ids))
    x, labels = batch["input_ids"], batch["labels"]
    chosen = labels != IGNORE_INDEX
    assert not chosen[ids == tok.eos_id].any() and not chosen[ids == tok.pad_id].any()
    replaced = chosen & (x != tok.mask_id) & (x != ids)
    assert replaced.sum() > 300  # ~10% of ~30% of 16k
    assert not torch.isin(x[replaced], torch.tensor(specials)).any()  # random tokens are ordinary ones
    assert bool((x[replaced] < V).all())


def test_a_task_needing_a_missing_special_token_is_refused(saved, tmp_path):
    save_tokenizer(tmp_path / "no-mask")
    without_mask = _build(tmp_path / "no-mask")
    with pytest.raises(DataError, match=r"task=masked_lm needs a mask token .* the hf tokenizer at .*no-mask has none"):
        require_specials(without_mask, "masked_lm")
    require_specials(without_mask, "causal_lm")
    require_specials(without_mask, "classification")  # cls falls back to bos
    save_tokenizer(tmp_path / "no-eos", eos_token=None)
    with pytest.raises(DataError, match="task=seq2seq needs an eos token"):
        require_specials(_build(tmp_path / "no-eos"), "seq2seq")
    save_tokenizer(tmp_path / "no-cls", bos_token=None)
    with pytest.raises(DataError, match="task=classification needs a cls token"):
        require_specials(_build(tmp_path / "no-cls"), "classification")
    # the data module checks before tokenizing anything
    dm = build_datamodule(
        {"source": "pydoc", "max_examples": 8, "seq_len": 32},
        {"kind": "hf", "path": str(tmp_path / "no-mask")},
        "masked_lm",
        batch_size=2,
    )
    with pytest.raises(DataError, match="needs a mask token"):
        dm.setup("fit")
