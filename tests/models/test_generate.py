"""Decoding: top-k(1) = greedy, seeded sampling, the stop rule, compiled steps, and the search
algorithm on hand-worked distributions. Cache = no cache, beam(1) = greedy and left padding for
every causal family and position scheme are tests/models/test_decoding_rows.py's."""

from __future__ import annotations

import math

import pytest
import torch

import zoo
from tests.conftest import CAUSAL_FAMILIES, sharp, tiny
from zoo.config import ConfigError
from zoo.models.generate import GenerationConfig, beam_search, filter_logits, generate

EOS, BOS = 3, 2


def model_and_inputs(family, position):
    model = zoo.build_model(sharp(family, position, max_seq_len=64)).eval()
    ids = torch.randint(6, 37, (2, 5))
    return model, ids


def run(model, ids, **options):
    kw = dict(bos_id=BOS, eos_id=None, max_new_tokens=options.pop("max_new_tokens", 12))
    return generate(model, ids, config=GenerationConfig(**options) if options else None, **kw)


@pytest.mark.parametrize("family", CAUSAL_FAMILIES)
def test_sampling_is_reproducible_and_top_k_one_is_greedy(family):
    model, ids = model_and_inputs(family, "rope")
    a = run(model, ids, strategy="sample", seed=7)
    assert torch.equal(a, run(model, ids, strategy="sample", seed=7))
    assert not all(torch.equal(a, run(model, ids, strategy="sample", seed=s)) for s in range(8, 12))
    assert torch.equal(run(model, ids, strategy="sample", top_k=1, seed=3), run(model, ids))
    assert torch.equal(run(model, ids, strategy="sample", top_p=1e-6, seed=3), run(model, ids))


def test_beam_search_keeps_the_two_best_cumulative_products():
    """Step 1: candidates A 0.4, B 0.3 (C 0.2); step 2: A·A = 0.4·0.5 = 0.2 and B·A = 0.3·0.4
    = 0.12 beat A·B = 0.1, B·B = 0.09, A·C = 0.08."""
    E, A, B = 0, 1, 2  # and C = 3
    first = torch.tensor([0.1, 0.4, 0.3, 0.2])
    after = {A: torch.tensor([0.05, 0.5, 0.25, 0.2]), B: torch.tensor([0.1, 0.4, 0.3, 0.2])}
    seen = []
    state = {"beams": [[], []]}

    def step(tokens, rows):
        if tokens is None:
            return first.log().expand(2, 4).clone()
        beams = [state["beams"][r] + [t] for t, r in zip(tokens.tolist(), rows.tolist())]
        state["beams"] = beams
        seen.append([list(b) for b in beams])
        if len(beams[0]) == 1:
            return torch.stack([after[b[-1]].log() for b in beams])
        return torch.tensor([[0.0, -math.inf, -math.inf, -math.inf]] * 2)  # end both

    state["beams"] = [[], []]
    best = beam_search(step, batch=1, num_beams=2, max_new_tokens=3, eos_id=E, length_penalty=0.0)
    assert seen[0] == [[A], [B]]
    assert seen[1] == [[A, A], [B, A]]
    tokens, score = best[0]
    assert tokens == [A, A, E] and score == pytest.approx(math.log(0.2))


def test_top_k_renormalises_over_the_kept_tokens():
    probs = torch.tensor([[0.4, 0.3, 0.2, 0.1]])
    kept = filter_logits(probs.log(), top_k=3).softmax(-1)[0]
    assert torch.allclose(kept, torch.tensor([0.4, 0.3, 0.2, 0.0]) / 0.9, atol=1e-6)
    assert torch.allclose(kept[:3], torch.tensor([0.444444, 0.333333, 0.222222]), atol=1e-5)
    nucleus = filter_logits(probs.log(), top_p=0.65).softmax(-1)[0]  # 0.4 + 0.3 reaches 0.65
    assert torch.allclose(nucleus, torch.tensor([0.4, 0.3, 0.0, 0.0]) / 0.7, atol=1e-6)
    warm = filter_logits(probs.log(), temperature=0.5).softmax(-1)[0]
    assert warm[0] > 0.4 and torch.allclose(warm.sum(), torch.tensor(1.0))


@pytest.mark.parametrize("top_p, kept", [(0.5, 1), (0.75, 2), (0.875, 3), (0.8, 3), (1.0, 4), (0.3, 1)])
def test_top_p_keeps_exactly_the_tokens_whose_cumulative_probability_reaches_p(top_p, kept):
    """Dyadic probabilities are exact in float32 (softmax of their logs returns them bit for bit),
    so cumulative sums 0.5, 0.75, 0.875, 1 are exact too: the nucleus is the smallest prefix of
    the ranked tokens whose mass reaches p; a token whose predecessors already reach p is dropped."""
    probs = torch.tensor([[0.125, 0.5, 0.125, 0.25]])
    assert torch.equal(probs.log().softmax(-1), probs)  # the premise: no rounding anywhere
    nucleus = filter_logits(probs.log(), top_p=top_p)[0]
    ranked = [1, 3, 0, 2]  # by probability; the two 0.125s are tied, either may be third
    kept_ids = torch.isfinite(nucleus).nonzero().flatten().tolist()
    assert len(kept_ids) == kept
    assert set(ranked[: min(kept, 2)]) <= set(kept_ids)
    assert torch.equal(nucleus.softmax(-1)[kept_ids].sum(), torch.tensor(1.0))


def test_generation_stops_at_eos_and_pads_after_it():
    model, ids = model_and_inputs("decoder_only", "alibi")
    free = run(model, ids, max_new_tokens=10)
    eos = int(free[0, 2])  # pretend the third token of row 0 is EOS
    first = free[0].tolist().index(eos)
    out = generate(model, ids, max_new_tokens=10, eos_id=eos, pad_id=0)
    assert torch.equal(out[0, : first + 1], free[0, : first + 1])
    assert (out[0, first + 1 :] == 0).all()


def test_asking_whether_rows_ended_every_k_steps_gives_the_same_output():
    """Both rows end at different steps; whether they have all ended is asked every step, every
    3rd and every 8th: the output is the same (the pad steps past the end are cut)."""
    model, ids = model_and_inputs("decoder_only", "rope")
    free = run(model, ids, max_new_tokens=14)
    eos = int(free[1, 4])  # row 1 ends at its fifth token at the latest
    ends = [row.tolist().index(eos) if eos in row.tolist() else None for row in free]
    assert ends[1] is not None and ends[1] < 13, "the drawn model must end row 1 before the last step"
    outs = [
        generate(model, ids, max_new_tokens=14, eos_id=eos, pad_id=0, config=GenerationConfig(stop_every=k))
        for k in (1, 3, 8)
    ]
    assert all(torch.equal(outs[0], o) for o in outs[1:])
    longest = max(e if e is not None else 13 for e in ends)
    assert outs[0].shape == (2, longest + 1)


def test_the_decoding_loop_reads_the_host_only_when_it_asks_to_stop():
    """On `meta` tensors every host read (`bool(t)`, `.item()`, `int(t)`) raises: prefill and 14
    decoding steps over a static cache run there with only the stop rule reading, asked every
    4th step and at the last (4 asks), and the default rule (`bool(done.all())`) is what reads."""
    model, ids = model_and_inputs("decoder_only", "rope")
    model, ids = model.to("meta"), ids.to("meta")
    asked = []

    def never(done):
        asked.append(done.shape)
        return False

    options = GenerationConfig(static_cache=True, stop_every=4, max_new_tokens=14)
    out = generate(model, ids, config=options, eos_id=EOS, pad_id=0, bos_id=BOS, stop=never)
    assert out.shape == (2, 14) and out.device.type == "meta"
    assert asked == [(2,)] * 4
    with pytest.raises((RuntimeError, NotImplementedError), match="(?i)meta"):
        generate(model, ids, config=options, eos_id=EOS, pad_id=0, bos_id=BOS)


def test_stop_every_is_a_positive_integer():
    for bad in (0, -2, True, 1.5):
        with pytest.raises(ConfigError, match="stop_every must be an integer >= 1"):
            GenerationConfig(stop_every=bad)


def test_options_of_another_strategy_are_refused():
    with pytest.raises(ConfigError, match="top_k only applies to strategy=sample"):
        GenerationConfig(top_k=5)
    with pytest.raises(ConfigError, match="num_beams only applies to strategy=beam"):
        GenerationConfig(strategy="sample", num_beams=2)
    with pytest.raises(ConfigError, match="greedy, beam, sample"):
        GenerationConfig(strategy="nucleus")
    with pytest.raises(ValueError, match="encoder-only"):
        generate(zoo.build_model(tiny("encoder_only")), torch.ones(1, 3, dtype=torch.long))


def test_the_decoding_defaults_are_the_ones_transformers_applies():
    """A user comparing zoo's generate with transformers' gets the same decoding when neither
    sets an option (num_beams and top_k aside: zoo's beam default is 4 beams, and top_k applies
    only when asked)."""
    import transformers

    hf = transformers.GenerationConfig()
    defaults = hf._get_default_generation_params() if hasattr(hf, "_get_default_generation_params") else vars(hf)
    ours = GenerationConfig()
    for name in ("use_cache", "length_penalty", "early_stopping", "temperature", "top_p"):
        assert getattr(ours, name) == defaults[name], name


@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample"])
def test_one_new_token_is_one_column(strategy):
    torch.manual_seed(0)
    model = zoo.build_model(tiny("decoder_only", "rope")).eval()
    ids = torch.randint(4, 37, (3, 5))
    out = run(model, ids, strategy=strategy, max_new_tokens=1)
    assert out.shape == (3, 1)


def test_a_stop_rule_is_refused_for_beam_search():
    """A stop rule makes ranks of a sharded model step together; beam search ends each row by its
    own beams, so it is refused rather than stepping apart."""
    import zoo
    from tests.conftest import tiny
    from zoo.config.schema.generation import GenerationConfig
    from zoo.models.generate import generate

    model = zoo.build_model(tiny())
    with pytest.raises(ValueError, match="not beam"):
        generate(
            model,
            torch.tensor([[1, 2]]),
            config=GenerationConfig(strategy="beam", num_beams=2),
            max_new_tokens=2,
            stop=lambda done: bool(done.all()),
        )


def test_a_top_p_below_float32s_least_keeps_the_most_likely_token():
    """top_p=1e-300 is 0 in float32: every token was dropped and sampling raised."""
    logits = torch.tensor([[0.5, 3.0, -1.0], [2.0, 0.0, 1.0]])
    kept = filter_logits(logits, top_p=1e-300)
    assert torch.isfinite(kept).sum(-1).tolist() == [1, 1]
    assert kept.argmax(-1).tolist() == [1, 0]
    assert torch.multinomial(kept.softmax(-1), 1).flatten().tolist() == [1, 0]


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"layer_pattern": ["gated_deltanet", "full"], "d_model": 32},
        {"attn_sink": "learned", "window": 4, "attention": "sliding"},
    ],
    ids=["rope", "gated_deltanet hybrid", "sliding with sinks"],
)
def test_the_compiled_greedy_step_is_one_graph_and_gives_the_plain_tokens(overrides):
    """compile=true over a static cache decodes each step as one compiled function (the model's
    step, the argmax and the end bookkeeping: `decode_step`), traced once, with no graph break, and
    gives plain greedy decoding's tokens, cut at the same end."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = zoo.build_model(sharp("decoder_only", "rope", max_seq_len=64, **overrides)).eval()
    ids = torch.randint(6, 37, (2, 5))
    free = generate(model, ids, max_new_tokens=12)
    fast = generate(model, ids, max_new_tokens=12, config=GenerationConfig(static_cache=True, compile=True))
    assert torch.equal(fast, free)
    eos = int(free[1, 6])  # row 1 ends by its seventh token
    ended = generate(model, ids, max_new_tokens=12, eos_id=eos, pad_id=0)
    fast = generate(
        model,
        ids,
        max_new_tokens=12,
        eos_id=eos,
        pad_id=0,
        config=GenerationConfig(static_cache=True, compile=True, stop_every=3),
    )
    assert torch.equal(fast, ended)
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 1, "the step was traced more than once"


@pytest.mark.slow
def test_prompts_of_other_lengths_reuse_the_compiled_step():
    """compile=true sizes the static cache in buckets of CAPACITY_BUCKET positions (at most
    max_seq_len), so prompts of 5, 9 and 30 tokens decode through one traced step, each giving
    plain greedy's tokens; without compile the cache is the exact need."""
    from torch._dynamo.utils import counters

    from zoo.models.generate import step_capacity

    torch._dynamo.reset()
    counters.clear()
    model = zoo.build_model(sharp("decoder_only", "rope", max_seq_len=128)).eval()
    options = GenerationConfig(static_cache=True, compile=True, max_new_tokens=8)
    for T in (5, 9, 30):
        ids = torch.randint(6, 37, (1, T))
        assert step_capacity(model, ids, options) == 128
        assert step_capacity(model, ids, GenerationConfig(static_cache=True, max_new_tokens=8)) == T + 8
        assert torch.equal(generate(model, ids, config=options), generate(model, ids, max_new_tokens=8))
    assert counters["stats"]["unique_graphs"] == 1, "a prompt of another length compiled the step again"
    long = torch.randint(6, 37, (1, 125))  # past max_seq_len by the new tokens: the exact need
    assert step_capacity(model, long, options) == 133


def test_a_draw_at_evenly_spaced_uniforms_takes_each_kept_token_as_often_as_its_probability():
    """`choose_sampled` is the inverse CDF of the filtered distribution: n uniforms at
    (i + 0.5) / n give each token round(p n) draws give or take one, none to a token top-k or
    top-p removed; the pad and end bookkeeping is the greedy choice's."""
    from zoo.models.generate import choose_greedy, choose_sampled, filter_logits

    n, row = 4000, torch.tensor([[2.0, 1.0, 0.5, -1.0, 0.0]])
    logits = row.expand(n, 5)  # (B, V): n rows of one distribution, a uniform each
    # B = n: tokens, ended flags, the step every row had ended after, the step, eos (none), pad
    state = torch.cat([torch.zeros(2 * n, dtype=torch.long), torch.tensor([100, 0, -1, 0])])
    u = (torch.arange(n) + 0.5) / n
    for temperature, top_k, top_p in ((1.0, 0, 1.0), (0.7, 3, 1.0), (1.3, 0, 0.8)):
        p = filter_logits(row, temperature=temperature, top_k=top_k, top_p=top_p).softmax(-1)[0]
        drawn = choose_sampled(logits, state, u, None, temperature=temperature, top_k=top_k, top_p=top_p)[:n]
        counts = torch.bincount(drawn, minlength=5)
        assert (counts - p * n).abs().max() <= 1.0, (counts, p * n)
        assert (counts[p == 0] == 0).all() and (p == 0).any() == (top_k > 0 or top_p < 1)
    greedy = choose_greedy(logits, state, None)
    assert torch.equal(choose_sampled(logits, state, u, None, temperature=1, top_k=1, top_p=1), greedy)


@pytest.mark.slow
def test_compiled_sampling_is_one_graph_seeded_and_top_k_one_is_greedy():
    """compile=true sampling over a static cache decodes through one compiled step with no graph
    break; a seed gives the same tokens twice and another seed others; top_k=1 gives greedy's."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = zoo.build_model(tiny("decoder_only", "rope", max_seq_len=64, init_std=0.1)).eval()
    ids = torch.randint(6, 37, (2, 5))

    def sampled(**options):
        config = GenerationConfig(static_cache=True, compile=True, strategy="sample", **options)
        return generate(model, ids, max_new_tokens=12, config=config)

    first, again, other = sampled(seed=1), sampled(seed=1), sampled(seed=2)
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 1, "the step was traced more than once"
    assert torch.equal(sampled(seed=3, top_k=1), generate(model, ids, max_new_tokens=12))
