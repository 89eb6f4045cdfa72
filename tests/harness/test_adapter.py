"""The harness model adapter (`zoo.harness.adapter.ZooLM`) against zoo's own forward, and against the
harness's own Hugging Face backend on the same model exported to transformers: the same
per-sample log-likelihoods and the same accuracy, through the real harness on the built-in
tasks (a handful of examples each)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("lm_eval")  # zoo[eval]; in the test extras, so it runs wherever the suite runs

from lm_eval.api.instance import Instance  # noqa: E402

from tests.conftest import tiny  # noqa: E402
from zoo.data.tokenizers.byte import ByteTokenizer  # noqa: E402
from zoo.harness.adapter import ZooLM  # noqa: E402
from zoo.harness.run import evaluate_tasks  # noqa: E402
from zoo.models.build import build_model  # noqa: E402


def _model(tokenizer, family: str = "decoder_only", **overrides):
    torch.manual_seed(0)
    cfg = tiny(family, "rope", vocab_size=tokenizer.vocab_size, max_seq_len=4096, **{"init_std": 0.2, **overrides})
    return build_model(cfg).eval().double()  # float64: batching and padding differ from a lone row by ~1e-12


def _own_loglikelihood(lm: ZooLM, context: str, continuation: str) -> float:
    """Zoo's forward on the one unpadded sequence, the continuation's log-probabilities summed
    (the context / continuation split is the harness's own, `_encode_pair`)."""
    ctx, cont = lm._encode_pair(context, continuation)
    with torch.no_grad():
        if lm.encoder_decoder:
            logits = lm.model(
                input_ids=torch.tensor([ctx]), decoder_input_ids=torch.tensor([[lm.bos_id] + cont[:-1]])
            ).logits[0]  # (n, V)
        else:
            logits = lm.model(torch.tensor([ctx + cont][:1])[:, :-1]).logits[0, -len(cont) :]  # (n, V)
    return float(F.log_softmax(logits, -1).gather(-1, torch.tensor(cont)[:, None]).sum())


@pytest.mark.parametrize("family", ["decoder_only", "encoder_decoder"])
def test_per_sample_loglikelihoods_equal_zoos_own_forward(family):
    """Two-shot multiple choice (a long context its choices share: run once, from a KV cache;
    contexts of different lengths batched, left-padded) and a cloze (each request whole): every
    sample's log-likelihood is zoo's forward on that sequence alone, to 1e-5."""
    tokenizer = ByteTokenizer()
    lm = ZooLM(_model(tokenizer, family), tokenizer, batch_size=8)
    shared = []
    if family == "decoder_only":
        run_once = lm._shared_context
        lm._shared_context = lambda batch, *args: shared.append(len(batch)) or run_once(batch, *args)
    out = evaluate_tasks(lm, ["kjv_next_verse", "kjv_cloze"], limit=3, num_fewshot=2, log_samples=True)
    if family == "decoder_only":
        assert sum(shared) == 3 and max(shared) > 1  # every question's context ran once, two in one batch
    compared = 0
    for task in ("kjv_next_verse", "kjv_cloze"):
        for sample in out["samples"][task]:
            for (context, continuation), [(logp, _)] in zip(sample["arguments"], sample["resps"]):
                assert logp == pytest.approx(_own_loglikelihood(lm, context, continuation), abs=1e-5, rel=0)
                compared += 1
    assert compared == 3 * 4 + 3
    assert set(out["metrics"]) >= {
        "harness/kjv_next_verse/acc",
        "harness/kjv_next_verse/acc_norm",
        "harness/kjv_cloze/acc",
        "harness/kjv_cloze/perplexity",
    }


def test_rolling_loglikelihood_counts_every_token_once_after_eos():
    """A text longer than the window (max_length 16): windows of the harness's own making, each
    token scored once; equal to zoo's forward over [eos] + text where the model sees it whole."""
    tokenizer = ByteTokenizer()
    model = _model(tokenizer)
    text = "In the beginning God created the heaven and the earth."
    ids = tokenizer.encode(text)
    with torch.no_grad():
        logits = model(torch.tensor([[tokenizer.eos_id] + ids[:-1]])).logits[0]
    whole = float(F.log_softmax(logits, -1).gather(-1, torch.tensor(ids)[:, None]).sum())
    request = Instance(request_type="loglikelihood_rolling", doc={}, arguments=(text,), idx=0)
    assert ZooLM(model, tokenizer, max_length=len(ids) + 1).loglikelihood_rolling([request])[0] == pytest.approx(
        whole, abs=1e-4
    )
    windowed = ZooLM(model, tokenizer, max_length=16).loglikelihood_rolling([request])[0]
    assert windowed != pytest.approx(whole, abs=1e-3)  # a shorter window sees less: a different figure
    assert windowed < 0


def test_generate_until_is_greedy_decoding_stopped_at_the_stop_string():
    """Greedy continuation equals argmax steps of zoo's forward without a cache; the text ends
    before the first stop string; rows decoded in one batch match rows decoded alone."""
    tokenizer = ByteTokenizer()
    model = _model(tokenizer, init_std=0.5)
    prompts = ["And God said", "In the beginning God"]
    expected = []
    for prompt in prompts:
        ids = tokenizer.encode(prompt)
        with torch.no_grad():
            for _ in range(6):
                ids.append(int(model(torch.tensor([ids])).logits[0, -1, : tokenizer.vocab_size].argmax()))
        expected.append(tokenizer.decode(ids[len(tokenizer.encode(prompt)) :]))
    lm = ZooLM(model, tokenizer, batch_size=2)
    requests = [
        Instance(
            request_type="generate_until",
            doc={},
            idx=0,
            arguments=(p, {"until": [], "max_gen_toks": 6, "do_sample": False}),
        )
        for p in prompts
    ]
    assert lm.generate_until(requests) == expected
    stop = expected[0][2:4]
    cut = Instance(
        request_type="generate_until",
        doc={},
        idx=0,
        arguments=(prompts[0], {"until": [stop], "max_gen_toks": 6, "do_sample": False}),
    )
    assert lm.generate_until([cut]) == [expected[0].split(stop)[0]]


def test_an_encoder_only_model_is_refused_on_one_line():
    from zoo.config.errors import ConfigError

    tokenizer = ByteTokenizer()
    with pytest.raises(ConfigError, match=r"^the harness scores continuations and a encoder_only model has no decoder"):
        ZooLM(_model(tokenizer, "encoder_only"), tokenizer)
