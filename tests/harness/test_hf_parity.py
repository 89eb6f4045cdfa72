"""The adapter against code nobody here wrote: a tiny random zoo model (Llama's composition) over
a transformers tokenizer, exported by zoo's exporter (`zoo.interop.hf.to_hf`, what zoo-export
writes), then scored by the harness's own Hugging Face backend (model "hf", pretrained= the
exported directory) and by the adapter on the zoo model: the same per-sample log-likelihoods
(1e-4), the same greedy flags and the same accuracy, two-shot (the multiple choice's context is
shared by its choices)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("lm_eval")
pytest.importorskip("accelerate")  # the harness's Hugging Face backend (lm_eval[hf], in the test extras)

from tests.conftest import tiny  # noqa: E402
from tests.interop.tiny_hf import save_tokenizer  # noqa: E402
from zoo.data.tokenizers.hf import HFTokenizer  # noqa: E402
from zoo.harness.adapter import ZooLM  # noqa: E402
from zoo.harness.run import evaluate_tasks  # noqa: E402
from zoo.interop.hf import to_hf  # noqa: E402
from zoo.models.build import build_model  # noqa: E402

TASKS = ["kjv_next_verse", "kjv_cloze"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(zoo model, its zoo tokenizer, the exported directory)."""
    directory = tmp_path_factory.mktemp("exported")
    save_tokenizer(directory)
    tokenizer = HFTokenizer(directory)
    torch.manual_seed(0)
    cfg = tiny(
        "decoder_only",
        "rope",
        norm_type="rmsnorm",
        activation="swiglu",
        bias=False,
        tie_embeddings=False,
        d_model=32,
        n_heads=4,
        n_kv_heads=2,
        vocab_size=tokenizer.vocab_size,
        max_seq_len=512,
        init_std=0.1,
    )
    model = build_model(cfg).eval()
    hf = to_hf(model)
    for name in ("bos", "eos", "pad"):  # as zoo-export writes them
        setattr(hf.config, f"{name}_token_id", tokenizer.special_ids()[name])
    hf.save_pretrained(directory)
    return model, tokenizer, directory


def test_the_harness_hugging_face_backend_scores_the_export_as_the_adapter_scores_zoo(exported):
    from lm_eval.models.huggingface import HFLM

    model, tokenizer, directory = exported
    # two-shot: the multiple choice's long context is shared by its choices (run once by the adapter)
    ours = evaluate_tasks(ZooLM(model, tokenizer, batch_size=4), TASKS, limit=4, num_fewshot=2, log_samples=True)
    hf_lm = HFLM(pretrained=str(directory), device="cpu", dtype="float32", batch_size=4)
    theirs = evaluate_tasks(hf_lm, TASKS, limit=4, num_fewshot=2, log_samples=True)
    compared = 0
    for task in TASKS:
        for mine, other in zip(ours["samples"][task], theirs["samples"][task], strict=True):
            assert mine["arguments"] == other["arguments"]
            for [(a, greedy_a)], [(b, greedy_b)] in zip(mine["resps"], other["resps"], strict=True):
                assert a == pytest.approx(b, abs=1e-4, rel=0)
                assert greedy_a == greedy_b
                compared += 1
    assert compared == 4 * 4 + 4
    for name in ("harness/kjv_next_verse/acc", "harness/kjv_next_verse/acc_norm", "harness/kjv_cloze/acc"):
        assert ours["metrics"][name] == theirs["metrics"][name]
    assert ours["metrics"]["harness/kjv_cloze/perplexity"] == pytest.approx(
        theirs["metrics"]["harness/kjv_cloze/perplexity"], rel=1e-4
    )
