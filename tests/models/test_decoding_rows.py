"""Decoding from a cache computes what the model computes without one. Every pair of kinds of causal
family × position scheme × residual option × cap (a covering design, tests/covering.py), one model
a row with sharp weights (init_std 0.5: logits far from ties, so a decoding bug that mixes up rows
or positions changes an argmax): its logits through a growing and through a static cache, a prompt
and then a token at a time, are the whole sequence's. The plain model of each family × position
pair (a row without options; a final cap of 1 flattens the logits to near ties, where an argmax is
rounding's to choose): greedy and beam decoding through the cache give the tokens of decoding
without one, a beam of one greedy's; a left-padded batch generates what each prompt generates
alone; the static cache decodes the growing cache's tokens, its step one graph at every step
(what CUDA graphs replay); lengths past a bounded scheme's positions are refused.

A new position scheme adds a row for each residual option and its two plain rows (about 9), not a
test for each property."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

import zoo
from tests.conftest import CAUSAL_FAMILIES, POSITIONS, sharp
from tests.covering import cases, model_axes
from tests.nn.residual_rows import OPTIONS as RESIDUAL_OPTIONS
from tests.nn.residual_rows import perturb
from zoo.config import ConfigError, ModelConfig
from zoo.config.facts.positions import POSITION_FACTS
from zoo.models.generate import GenerationConfig, generate
from zoo.models.limits import check_lengths

EOS, BOS = 3, 2
CACHES = {"growing": None, "static": 7}  # the capacity of the row's cache of 7 tokens
# the residual options (value residual, value embeddings, hyper-connections) and the caps, each
# with "none": the plain model
RESIDUAL = {"none": {}, **RESIDUAL_OPTIONS}
CAPS = {
    "none": {},
    "attn_softcap": dict(attn_softcap=0.5),
    "final_softcap": dict(final_softcap=1.0),
}
DESIGN = cases({"family": CAUSAL_FAMILIES, **model_axes("position"), "residual": list(RESIDUAL), "cap": list(CAPS)})
PLAIN = ("none", "none")  # (residual, cap): the rows whose tokens are checked
# the design, and the plain model of each family × position pair that no row of it is
ROWS = DESIGN + [
    pytest.param(family, position, *PLAIN, id="-".join((family, position, *PLAIN)))
    for family in CAUSAL_FAMILIES
    for position in POSITIONS
    if (family, position, *PLAIN) not in {tuple(row.values) for row in DESIGN}
]


def build(family: str, position: str, residual: str, cap: str, **overrides):
    """The row's model, its mixing weights moved off their start (no check passes at an identity)."""
    model = zoo.build_model(sharp(family, position, max_seq_len=64, **RESIDUAL[residual], **CAPS[cap], **overrides))
    perturb(model)
    return model.eval()


@pytest.mark.parametrize("family, position, residual, cap", ROWS)
def test_a_row_decodes_from_its_cache_what_it_computes_without_one(subtests, family, position, residual, cap):
    """One model a row: its logits through each cache; a plain row's greedy, beam and left-padded
    decoding, its static cache's tokens and single graph, and its bounded positions' refusals."""
    model = build(family, position, residual, cap)
    for cache in CACHES:
        with subtests.test(f"the {cache} cache's logits are the whole sequence's"):
            assert_cached_logits_are_the_whole_sequences(model, family, cache)
    if (residual, cap) != PLAIN:
        return
    with subtests.test("cached greedy = uncached"):
        assert_cached_greedy_equals_uncached(model)
    with subtests.test("beam of one = greedy, beam with a cache = without"):
        assert_beam_of_one_is_greedy_and_beam_cache_is_no_cache(model)
    with subtests.test("a left-padded batch generates what each prompt generates alone"):
        assert_left_padded_batch_generates_each_prompts_tokens(model)
    with subtests.test("the static cache decodes the growing cache's tokens"):
        assert_static_cache_decodes_the_same_tokens(model, family)
    with subtests.test("decoding past a bounded scheme's positions is refused"):
        assert_decoding_past_a_bounded_schemes_positions_is_refused(family, position)
    with subtests.test("the static decoding step is one graph at every step"):
        assert_static_decoding_step_is_one_graph(model, family)


def _prompt_then_tokens(model, family: str, ids: torch.Tensor, cache) -> list[torch.Tensor]:
    """The logits of ids through `cache`: a 3-token prompt, then a token at a time."""
    memory = model.encode(ids) if family == "encoder_decoder" else None
    steps = []
    for step in [ids[:, :3]] + [ids[:, t : t + 1] for t in range(3, ids.shape[1])]:
        if memory is None:
            out = model(step, cache=cache, use_cache=True)
        else:
            out = model(decoder_input_ids=step, encoder_hidden_states=memory, cache=cache, use_cache=True)
        steps.append(out.logits)  # (B, T or 1, V)
    return steps


def assert_cached_logits_are_the_whole_sequences(model, family: str, cache: str):
    """A prompt, then one token at a time through the cache, gives the whole sequence's logits."""
    ids = torch.randint(4, 37, (2, 7))
    inputs = {"input_ids": ids} if family == "decoder_only" else {"input_ids": ids, "decoder_input_ids": ids}
    with torch.no_grad():
        whole = model(**inputs).logits  # (B, T, V)
        steps = _prompt_then_tokens(model, family, ids, model.new_cache(CACHES[cache]))
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, rtol=1e-4, atol=1e-5)


def _run(model, ids, **options):
    kw = dict(bos_id=BOS, eos_id=None, max_new_tokens=options.pop("max_new_tokens", 12))
    return generate(model, ids, config=GenerationConfig(**options) if options else None, **kw)


def assert_cached_greedy_equals_uncached(model):
    """Greedy decoding through the cache gives the tokens of decoding without one."""
    ids = torch.randint(6, 37, (2, 5))
    cached = _run(model, ids)
    assert cached.shape == (2, 12)
    assert torch.equal(cached, _run(model, ids, use_cache=False))


def assert_beam_of_one_is_greedy_and_beam_cache_is_no_cache(model):
    """A beam of one is greedy decoding; three beams through the cache give the tokens of three without."""
    ids = torch.randint(6, 37, (2, 5))
    greedy = _run(model, ids)
    assert torch.equal(_run(model, ids, strategy="beam", num_beams=1), greedy)
    beams = _run(model, ids, strategy="beam", num_beams=3, max_new_tokens=6)
    assert torch.equal(beams, _run(model, ids, strategy="beam", num_beams=3, max_new_tokens=6, use_cache=False))


def assert_left_padded_batch_generates_each_prompts_tokens(model):
    """Left padding must change neither the positions of the real tokens nor what they attend to,
    at the prompt and at every one-token step after it."""
    short, long = torch.randint(6, 37, (1, 3)), torch.randint(6, 37, (1, 6))
    batch = torch.cat([torch.cat([torch.zeros(1, 3, dtype=torch.long), short], 1), long])
    mask = torch.tensor([[0, 0, 0, 1, 1, 1], [1] * 6])
    both = generate(model, batch, attention_mask=mask, max_new_tokens=8, bos_id=BOS)
    assert torch.equal(both[0], generate(model, short, max_new_tokens=8, bos_id=BOS)[0])
    assert torch.equal(both[1], generate(model, long, max_new_tokens=8, bos_id=BOS)[0])


def assert_static_cache_decodes_the_same_tokens(model, family: str):
    """Greedy and beam decoding of a (decoder-only: left-padded) batch through the static cache
    give the growing cache's tokens."""
    ids = torch.randint(4, 37, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    if family == "decoder_only":
        ids[1, :2], mask[1, :2] = 0, 0  # a left-padded prompt
    kw = dict(attention_mask=mask, max_new_tokens=9, bos_id=1)
    growing = generate(model, ids, config=GenerationConfig(), **kw)
    static = generate(model, ids, config=GenerationConfig(static_cache=True), **kw)
    assert torch.equal(static, growing)
    beams = GenerationConfig(strategy="beam", num_beams=3)
    static_beams = GenerationConfig(strategy="beam", num_beams=3, static_cache=True)
    assert torch.equal(generate(model, ids, config=static_beams, **kw), generate(model, ids, config=beams, **kw))


def assert_decoding_past_a_bounded_schemes_positions_is_refused(family: str, position: str):
    """Lengths that fit max_seq_len pass; past it, a bounded scheme refuses them naming the
    scheme and model.max_seq_len, and any other scheme decodes on."""
    cfg = ModelConfig(**sharp(family, position, max_seq_len=16))
    fits = (10, 6) if family == "decoder_only" else (16, 15)  # encoder-decoder: source; BOS + new
    check_lengths(cfg, *fits)
    over = [(10, 7)] if family == "decoder_only" else [(17, 1), (4, 16)]
    for input_len, new in over:
        if POSITION_FACTS[cfg.position.kind].bounded:
            with pytest.raises(
                ConfigError,
                match=rf"past the {position} positions|longer than the {position} positions",
            ) as refused:
                check_lengths(cfg, input_len, new)
            assert "(model.max_seq_len=16)" in str(refused.value)
        else:
            check_lengths(cfg, input_len, new)


def assert_static_decoding_step_is_one_graph(model, family: str):
    """After the prompt, every step has the same shapes and no Python number that changes (the
    cache's slot is a device tensor): traced once, never recompiled, as a CUDA graph needs."""
    prompt = torch.randint(4, 37, (2, 5))
    steps = 6
    cache = model.new_cache(capacity=5 + steps)
    if family == "encoder_decoder":
        memory = model.encode(prompt)

        def run(m, tokens):
            return m(decoder_input_ids=tokens, encoder_hidden_states=memory, cache=cache, use_cache=True).logits

        first = torch.ones(2, 5, dtype=torch.long)  # a 5-token decoder prefix
    else:

        def run(m, tokens):
            return m(tokens, cache=cache, use_cache=True).logits

        first = prompt
    with torch.no_grad():
        run(model, first)  # the prompt, eagerly (as zoo.models.generate runs it)
        torch._dynamo.reset()
        step = torch.compile(model, backend="eager", fullgraph=True)
        with torch._dynamo.config.patch(error_on_recompile=True):
            tokens = torch.randint(4, 37, (2, steps))
            compiled = [run(step, tokens[:, i : i + 1]) for i in range(steps)]
        whole = torch.cat([first, tokens], dim=1)  # the same tokens through the model without a cache
        if family == "encoder_decoder":
            reference = model(decoder_input_ids=whole, encoder_hidden_states=memory).logits
        else:
            reference = model(whole).logits
    torch.testing.assert_close(torch.cat(compiled, dim=1), reference[:, 5:], atol=1e-5, rtol=1e-4)
