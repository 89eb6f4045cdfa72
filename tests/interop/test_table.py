"""The converter tables themselves: every named transform a family's rows use is undone by its
inverse, every family's weight table names each zoo weight once, and a malformed declaration
(a stack without its layer index, a row without names, a composition or family missing a name)
is refused when it is written, not when a model is converted."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from zoo.config.schema.model import ModelConfig
from zoo.interop.hf import CONVERTERS, FAMILIES
from zoo.interop.hf.table import Composition, Family, Row, Stack, Table, row


def _rows(table: Table) -> list[Row]:
    return [*table.top, *(r for stack in table.stacks for r in stack.rows)]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.model_type)
def test_every_transform_of_a_family_is_undone_by_its_inverse(family):
    """zoo -> transformers -> zoo gives the tensor back, for each transform a row names (on
    tensors shaped as that row's: a fused q, k, v of 4 heads, a bias, a norm)."""
    # a latent family's rows (DeepSeek-V3) at widths where its query rows H·d_qk and its latent rows
    # r + d_r are both the 3·H·Dh rows tried here
    latent = {"kv": "latent", "qk_nope_head_dim": 160, "qk_rope_head_dim": 32, "kv_lora_rank": 736}
    reads_latent = family.composition.options.get("kv") == ("latent",)
    cfg = ModelConfig(attention_scale=1.0, **(latent if reads_latent else {}))  # T5's query scale: unscaled both ways
    rows = 3 * cfg.n_heads * cfg.head_dim
    torch.manual_seed(0)
    for r in _rows(family.table):
        for tensor in (torch.randn(rows, cfg.d_model), torch.randn(rows)):
            back = r.transform.to_zoo(r.transform.to_hf(tensor, cfg), cfg)
            assert torch.allclose(back, tensor, rtol=0, atol=1e-6), (family.model_type, r.zoo, r.transform.name)


def test_the_query_scale_is_folded_into_the_query_rows_only():
    """T5's export multiplies the H·Dh query rows by zoo's score scale and leaves k, v alone."""
    t5 = CONVERTERS["t5"].family
    fold = next(r.transform for r in _rows(t5.table) if r.transform.name == "query_scale")
    cfg = ModelConfig(attention_scale=0.5)
    weight = torch.ones(3 * cfg.n_heads * cfg.head_dim, cfg.d_model)
    out = fold.to_hf(weight, cfg)
    q_rows = cfg.n_heads * cfg.head_dim
    assert torch.equal(out[:q_rows], weight[:q_rows] * 0.5) and torch.equal(out[q_rows:], weight[q_rows:])


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.model_type)
def test_no_two_rows_of_a_table_write_the_same_transformers_name(family):
    """Each transformers weight comes from one zoo weight (a second row would overwrite it)."""
    table = family.table
    stacks = [(stack.hf, r) for stack in table.stacks for r in stack.rows]
    rows = [("", r) for r in table.top] + stacks  # a stack's names under its prefix ({i} left as it is)
    names = [table.embed, table.lm_head]
    names += [prefix + name + s for prefix, r in rows if r.when is None for name in r.hf for s in r.suffixes]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_a_malformed_declaration_is_refused_where_it_is_written():
    with pytest.raises(ValueError, match=r"\{i\}"):
        Stack("decoder.layers.", "model.layers.{i}.", ())
    with pytest.raises(ValueError, match="transformers names"):
        row("embed.weight")
    with pytest.raises(ValueError, match="every choice"):
        Composition("decoder_only", "rope", "", "rmsnorm", "swiglu")
    llama = CONVERTERS["llama"].family
    with pytest.raises(ValueError, match="names its model_type"):
        replace(llama, names=("llama", "", "LlamaConfig"))
    with pytest.raises(ValueError, match="token table"):
        Table(embed="")
    assert isinstance(llama, Family)
