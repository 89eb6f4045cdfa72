"""Data and tokenizer schemas, and the YAML groups conf/data and conf/tokenizer."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from zoo.config.errors import ConfigError
from zoo.config.facts.corpora import CORPUS_ROWS
from zoo.config.schema.data import (
    DataConfig,
    DataSource,
    TokenizerConfig,
    TokenizerKind,
    as_data_config,
    as_tokenizer_config,
)
from zoo.config.schema.store import thawed_schema

CONF = Path(__file__).resolve().parents[2] / "conf"


def _message(call, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        call(**kwargs)
    assert "\n" not in str(info.value)
    return str(info.value)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"source": "wiki"}, "data.source='wiki' is not allowed; choose one of: kjv, pydoc, numbers"),
        ({"seq_len": 1}, "data.seq_len must be an integer >= 2, got 1"),
        ({"global_batch_size": 0}, "data.global_batch_size must be an integer >= 1, got 0"),
        ({"val_fraction": 0.0}, "data.val_fraction must be in (0, 1), got 0.0"),
        ({"val_fraction": 1.5}, "data.val_fraction must be in (0, 1), got 1.5"),
        ({"num_workers": -1}, "data.num_workers must be an integer >= 0, got -1"),
        ({"max_examples": 1}, "data.max_examples must be an integer >= 2, got 1"),
        ({"mlm_probability": 1.0}, "data.mlm_probability must be in (0, 1)"),
        ({"source": "local"}, "data.source=local needs data.path"),
        ({"source": "hub"}, "data.source=hub needs data.hub_name"),
        ({"source": "kjv", "path": "x.txt"}, "data.path only applies to data.source=local, not kjv"),
        ({"hub_name": "wikitext"}, "data.hub_name / data.hub_config only apply to data.source=hub"),
        ({"source": "local", "path": [1, 2]}, "data.path must be a path string or a non-empty list"),
        ({"text_column": ""}, "data.text_column must be a non-empty column name"),
    ],
)
def test_data_config_rejects(kwargs, expected):
    assert expected in _message(DataConfig, **kwargs)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"kind": "wordpiece"}, "tokenizer.kind='wordpiece' is not allowed; choose one of: byte, char"),
        ({"kind": "byte", "vocab_size": 512}, "tokenizer.vocab_size only applies to tokenizer=sentencepiece_bpe"),
        ({"vocab_size": 8}, "tokenizer.vocab_size must be an integer >= 16, got 8"),
        ({"character_coverage": 0.5}, "tokenizer.character_coverage must be in [0.9, 1], got 0.5"),
    ],
)
def test_tokenizer_config_rejects(kwargs, expected):
    assert expected in _message(TokenizerConfig, **kwargs)


def test_defaults_and_parsing():
    data = DataConfig()
    assert data.source == DataSource.kjv and data.seq_len == 256 and data.global_batch_size == 32
    tok = TokenizerConfig()
    assert tok.kind == TokenizerKind.sentencepiece_bpe and tok.vocab_size == 8192
    local = as_data_config({"source": "local", "path": ["a.txt", "b.txt"]})
    assert local.path == ("a.txt", "b.txt")  # a list of paths is kept as a tuple: the config is frozen
    assert local.to_dict()["path"] == ["a.txt", "b.txt"]  # plain data: a list, as records hold it
    assert as_data_config(local.to_dict()).path == ("a.txt", "b.txt")
    assert "unknown key data.seqlen; allowed keys: source, path" in _message(as_data_config, cfg={"seqlen": 3})
    assert as_tokenizer_config({"kind": "char"}).kind == TokenizerKind.char


@pytest.mark.parametrize("name", [row.name for row in CORPUS_ROWS] + ["local"])
def test_data_yaml_matches_the_schema(name):
    # composed as Hydra composes it: against the schema's unfrozen twin, which takes overrides
    node = OmegaConf.merge(
        OmegaConf.structured(thawed_schema(DataConfig)), OmegaConf.load(CONF / "data" / f"{name}.yaml")
    )
    if name == "local":
        # "???" merged into the schema keeps the default (None): either way data.path is asked for
        assert "data.path" in _message(as_data_config, cfg=node)
        assert "data.path must be set" in _message(as_data_config, cfg=OmegaConf.load(CONF / "data" / "local.yaml"))
        node.path = "corpus.txt"
    cfg = as_data_config(node)
    assert cfg.source.value == name


@pytest.mark.parametrize("name", ["byte", "char", "sentencepiece_bpe", "sentencepiece_unigram"])
def test_tokenizer_yaml_composes_into_the_schema(name):
    import zoo

    cfg = zoo.compose([f"tokenizer={name}", "model.vocab_size=512"])
    tok = as_tokenizer_config(cfg.tokenizer)
    assert tok.kind.value == name
    if name.startswith("sentencepiece"):
        assert tok.vocab_size == 512  # follows model.vocab_size


def test_hydra_composes_the_groups():
    import zoo

    cfg = zoo.compose(["data=numbers", "tokenizer=char", "data.num_pairs=500"])
    data, tok = as_data_config(cfg.data), as_tokenizer_config(cfg.tokenizer)
    assert data.source == DataSource.numbers and data.num_pairs == 500
    assert data.text_column == "source" and tok.kind == TokenizerKind.char
