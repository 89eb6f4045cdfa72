"""Document masking of packed sequences (data.document_mask=true): a packed window computes, for
every token, what its document computes alone, under every position scheme and both kernels."""

from __future__ import annotations

import warnings

import pytest
import torch

import zoo
from tests.conftest import POSITIONS, sharp
from zoo.data.collate.causal import collate_causal
from zoo.data.collate.masked import IGNORE_INDEX
from zoo.nn.documents import DocumentMask, positions_in_documents, takes_flex
from zoo.nn.mask import document_mask

EOS = 3
LENGTHS = (5, 1, 9, 4, 7)  # documents of a window, each ending in eos (the second is eos alone)


def _window(lengths=LENGTHS, seed: int = 0) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One packed window (T + 1 ids) of documents ending in eos, and each document's ids."""
    g = torch.Generator().manual_seed(seed)
    docs = [torch.cat([torch.randint(8, 37, (n - 1,), generator=g), torch.tensor([EOS])]) for n in lengths]
    tail = torch.randint(8, 37, (1,), generator=g)  # the next window's first token, the last label
    return torch.cat([*docs, tail]), docs


def _model(position: str, **overrides):
    return zoo.build_model(sharp(position=position, max_seq_len=32, **overrides)).eval()


def _packed_logits(model, batch: dict, kernel: str) -> torch.Tensor:
    model.decoder.document_kernel = kernel
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        return model(batch["input_ids"], document_ids=batch["document_ids"]).logits  # (B, T, V)


def test_collate_marks_documents_and_drops_the_label_across_a_boundary():
    window, docs = _window()
    batch = collate_causal([window], eos_id=EOS)
    ids, labels = batch["document_ids"][0], batch["labels"][0]
    expected = torch.cat([torch.full((len(d),), i) for i, d in enumerate(docs)])
    assert torch.equal(ids, expected)
    ends = torch.cumsum(torch.tensor(LENGTHS), 0) - 1  # the eos of each document
    assert (labels[ends] == IGNORE_INDEX).all()  # the next document's first token: no target
    kept = torch.ones_like(labels, dtype=torch.bool)
    kept[ends] = False
    assert torch.equal(labels[kept], window[1:][kept])  # every other target is the next token
    assert torch.equal(
        positions_in_documents(batch["document_ids"])[0], torch.cat([torch.arange(len(d)) for d in docs])
    )
    assert "document_ids" not in collate_causal([window])  # the default is unchanged


def test_boolean_document_mask_is_block_diagonal_causal():
    ids = torch.tensor([[0, 0, 1, 1, 1, 2]])
    mask = document_mask(ids)[0, 0]
    for i in range(6):
        for j in range(6):
            assert bool(mask[i, j]) == (j <= i and int(ids[0, i]) == int(ids[0, j])), (i, j)


@pytest.mark.parametrize("position", POSITIONS)
def test_a_scheme_gives_each_packed_document_its_own_logits_with_either_kernel(subtests, position):
    """Under one position scheme: a packed window gives each document the logits it has alone, with
    SDPA's kernel and with FlexAttention's; the two kernels agree in logits (and gradients)."""
    model = _model(position)
    for kernel in ("sdpa", "flex"):
        with subtests.test(f"a packed window gives each document its own logits ({kernel})"):
            assert_packed_window_gives_each_documents_own_logits(model, kernel)
    with subtests.test("FlexAttention and SDPA agree in logits and gradients"):
        assert_flex_and_sdpa_kernels_agree_in_logits_and_gradients(position)


def assert_packed_window_gives_each_documents_own_logits(model, kernel: str):
    """Each document's logits are its own alone; without the mask, the documents after the first
    see the ones before them."""
    window, docs = _window()
    batch = collate_causal([window, _window(seed=1)[0]], eos_id=EOS)
    with torch.no_grad():
        packed = _packed_logits(model, batch, kernel)[0]  # (T, V)
        alone = torch.cat([model(d[None]).logits[0] for d in docs])  # (T, V)
        unmasked = model(batch["input_ids"]).logits[0]  # (T, V): attends across documents
    torch.testing.assert_close(packed, alone, rtol=1e-5, atol=1e-5)
    first = LENGTHS[0]  # the first document sees nothing before it, masked or not
    torch.testing.assert_close(unmasked[:first], alone[:first], rtol=1e-5, atol=1e-5)
    assert (unmasked[first:] - alone[first:]).abs().max() > 1e-2  # without the mask they differ


def assert_flex_and_sdpa_kernels_agree_in_logits_and_gradients(position: str):
    """Logits on the CPU; gradients too where there is a GPU (FlexAttention has no backward on
    the CPU in torch 2.13, which is why training there takes SDPA)."""
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = _model(position, n_kv_heads=1).to(device)  # grouped-query heads too
    batch = {k: v.to(device) for k, v in collate_causal([_window(seed=s)[0] for s in range(3)], eos_id=EOS).items()}
    out = {}
    for kernel in ("sdpa", "flex"):
        model.zero_grad()
        with torch.set_grad_enabled(device.type != "cpu"):
            logits = _packed_logits(model, batch, kernel)
        if logits.requires_grad:
            logits.square().mean().backward()
        out[kernel] = (logits.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None])
    torch.testing.assert_close(out["flex"][0], out["sdpa"][0], rtol=1e-5, atol=1e-5)
    assert len(out["flex"][1]) == len(out["sdpa"][1]) == (0 if device.type == "cpu" else len(out["sdpa"][1]))
    for flex, sdpa in zip(out["flex"][1], out["sdpa"][1], strict=True):
        torch.testing.assert_close(flex, sdpa, rtol=1e-4, atol=1e-5)


def test_a_cache_with_document_ids_is_refused():
    model = _model("rope")
    batch = collate_causal([_window()[0]], eos_id=EOS)
    with pytest.raises(ValueError, match="without a KV cache"):
        model(batch["input_ids"], document_ids=batch["document_ids"], use_cache=True)


def test_flex_is_taken_only_where_nothing_needs_the_explicit_path():
    mask = DocumentMask(torch.zeros(1, 4, dtype=torch.long), kernel="flex")
    plain = dict(bias=None, math_path=False, dropout=0.0, head_dim=16)
    assert takes_flex(mask, **plain)
    assert not takes_flex(mask, **{**plain, "bias": torch.zeros(1, 2, 4, 4)})  # T5 bias, ALiBi
    assert not takes_flex(mask, **{**plain, "math_path": True})  # Shaw's weights
    assert not takes_flex(mask, **{**plain, "dropout": 0.1})
    assert not takes_flex(mask, **{**plain, "head_dim": 8})  # compiled FlexAttention refuses heads under 16
    assert not takes_flex(DocumentMask(mask.document_ids, kernel="sdpa"), **plain)
    padded = DocumentMask(mask.document_ids, kernel="flex", key_padding=torch.ones(1, 4))
    assert padded.kernel == "sdpa"


@pytest.mark.slow
def test_a_compiled_training_step_on_the_cpu_gives_the_eager_loss_and_gradients():
    """task.compile=true with document masking (SDPA with the boolean mask on the CPU)."""
    from tests.conftest import tiny
    from zoo.tasks import TASKS

    batch = collate_causal([_window(seed=s)[0] for s in range(2)], eos_id=EOS)
    out = {}
    for compile in (False, True):
        torch.manual_seed(0)
        task = TASKS["causal_lm"](model=tiny(position="rope"), task={"kind": "causal_lm", "compile": compile})
        loss = task.training_loss(batch)[0]
        loss.backward()
        out[compile] = (loss.detach(), [p.grad for p in task.model.parameters()])
    torch.testing.assert_close(out[True][0], out[False][0], rtol=1e-5, atol=1e-6)
    for compiled, eager in zip(out[True][1], out[False][1], strict=True):
        torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("global_every", [None, 2])
@pytest.mark.parametrize("position", ["rope", "alibi", "learned"])
def test_packed_documents_under_a_sliding_window_see_their_own_band(position, global_every):
    """A sliding layer of a packed window sees the keys that are both in its document and in its
    band: the logits equal each document run alone under the same window (narrower than the
    longest document, so the band matters), and differ from the band without documents."""
    torch.manual_seed(0)
    model = _model(position, attention="sliding", window=4, global_every=global_every)
    window, docs = _window()
    batch = collate_causal([window], eos_id=EOS)
    with torch.no_grad():
        packed = _packed_logits(model, batch, "sdpa")[0]  # (T, V)
        alone = torch.cat([model(d[None]).logits[0] for d in docs])  # (T, V)
        unmasked = model(batch["input_ids"]).logits[0]  # (T, V): the band across documents
    torch.testing.assert_close(packed, alone, rtol=1e-5, atol=1e-5)
    assert (unmasked[LENGTHS[0] :] - alone[LENGTHS[0] :]).abs().max() > 1e-2
