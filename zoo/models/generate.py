"""Decoding over the KV cache: greedy, beam search and sampling, for decoder-only models
(continuing prompts; batches of different lengths are left-padded and positions count only real
tokens) and encoder-decoder models (source -> target; the cross-attention keys and values are
computed once per source)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any, cast

import torch

from zoo.config.facts.families import FAMILY_FACTS
from zoo.config.schema.generation import OPTIONS_OF, GenerationConfig, Strategy  # noqa: F401  (re-exported)
from zoo.models.base import ZooModel
from zoo.models.encoder_decoder import EncoderDecoder
from zoo.models.mtp import MultiTokenPrediction
from zoo.models.speculative import check_speculative, speculative_generate
from zoo.nn.cache import Cache


def filter_logits(
    logits: torch.Tensor, *, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0
) -> torch.Tensor:
    """Temperature, then top-k (Fan et al. 2018), then nucleus / top-p (Holtzman et al. 2020)
    filtering; removed entries become -inf. logits (B, V) -> (B, V)."""
    logits = logits / temperature
    if top_k > 0 and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # (B, V)
        probs = sorted_logits.softmax(-1)
        before = probs.cumsum(-1) - probs  # probability mass ranked above each token
        drop_sorted = before >= top_p
        drop_sorted[:, 0] = False  # the most likely token is always kept (a top_p below float32's least is 0)
        drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


class _Stepper:
    """Feeds one model step at a time and keeps what the next step needs (cache, mask,
    context, encoder states). `rows` may repeat inputs (beam search)."""

    def __init__(
        self,
        model: ZooModel,
        input_ids,
        attention_mask,
        *,
        bos_id,
        use_cache: bool,
        repeat: int = 1,
        capacity: int | None = None,
        compile: bool = False,
    ):
        self.model = model
        # the prompt runs once, eagerly; the steps run the compiled model (with a static cache
        # on CUDA: replayed as CUDA graphs)
        self.run_model = compiled(model, cuda_graphs=capacity is not None and input_ids.is_cuda) if compile else model
        self.use_cache = use_cache
        self.capacity = capacity  # a static cache of this many positions, or a growing one
        self.cache: Cache | None = None
        B = input_ids.shape[0]
        if repeat > 1:
            input_ids = input_ids.repeat_interleave(repeat, dim=0)  # (B·K, T)
            if attention_mask is not None:
                attention_mask = attention_mask.repeat_interleave(repeat, dim=0)
        self.encoder_decoder = FAMILY_FACTS[model.config.family].cross_attention
        if self.encoder_decoder:
            if bos_id is None:
                raise ValueError("encoder-decoder generation needs bos_id (the first decoder input)")
            self.memory = cast(EncoderDecoder, model).encode(input_ids, attention_mask)  # (B·K, S, D)
            # one look at the mask here, not a host sync at every step: no padding, no mask
            self.source_mask = attention_mask if attention_mask is not None and not bool(attention_mask.all()) else None
            self.context = torch.full((B * repeat, 1), bos_id, dtype=torch.long, device=input_ids.device)
            self.mask = None
        else:
            self.context = input_ids
            # without padding no mask is needed: positions count from 0 and attention takes the
            # fused causal path; with padding the mask grows by one column per step
            self.mask = attention_mask if attention_mask is not None and not bool(attention_mask.all()) else None

    def _run(self, tokens: torch.Tensor, model: torch.nn.Module) -> torch.Tensor:
        if self.use_cache and self.cache is None and self.capacity is not None:
            self.cache = self.model.new_cache(self.capacity)
        one = tokens.shape[1] == 1  # a decoding step: its logits come out of the (compiled) model
        if self.encoder_decoder:
            out = model(
                decoder_input_ids=tokens,
                encoder_hidden_states=self.memory,
                attention_mask=self.source_mask,
                cache=self.cache,
                use_cache=self.use_cache,
                return_logits=one,
            )
        else:
            out = model(tokens, attention_mask=self.mask, cache=self.cache, use_cache=self.use_cache, return_logits=one)
        self.cache = out.cache if self.use_cache else None
        if self.cache is not None and self.cache.static:
            self.cache.mark_static()  # the prefill may have run compiled, where nothing is marked
        if one:
            return out.logits[:, -1].clone()  # (rows, V); a CUDA graph's output is overwritten by its next replay
        return self.model.logits(out.hidden_states[:, -1:])[:, 0]  # only the last position: (rows, V)

    def start(self) -> torch.Tensor:
        return self._run(self.context, self.model)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (rows,) appended -> next-token logits (rows, V)."""
        self.context = torch.cat([self.context, tokens[:, None]], dim=1)  # (rows, T + 1)
        if self.mask is not None:
            self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        return self._run(tokens[:, None] if self.use_cache else self.context, self.run_model)

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows `index` (beam search)."""
        self.context = self.context[index]
        if self.mask is not None:
            self.mask = self.mask[index]
        if self.cache is not None:
            self.cache.reorder(index)
        if self.encoder_decoder:
            self.memory = self.memory[index]
            if self.source_mask is not None:
                self.source_mask = self.source_mask[index]


COMPILED_ATTR = "_zoo_compiled"  # on the model: mode -> its compiled forward (a plain dict, no submodule)


def compiled(model: ZooModel, *, cuda_graphs: bool = False) -> torch.nn.Module:
    """torch.compile(model), made once per model (and mode) and reused by later generate calls.
    cuda_graphs: mode "reduce-overhead", which replays each step as one CUDA graph (a static
    cache's step has fixed shapes and addresses). A model compiled in place (task.compile=true)
    is used as it is without CUDA graphs; with them, its uncompiled `forward` is compiled again in
    mode "reduce-overhead" (the in-place compilation has no CUDA graphs: a decoding step would
    launch every kernel from the host, slower than eager on an H100, zoo-bench 2026-11-26)."""
    in_place = getattr(model, "_compiled_call_impl", None) is not None
    if in_place and not cuda_graphs:
        return model
    # held by the model itself, so the compiled module (which holds the model) goes with it; a
    # table keyed by the model would keep every model alive through its own value
    modes = model.__dict__.setdefault(COMPILED_ATTR, {})
    mode = "reduce-overhead" if cuda_graphs else "default"
    if mode not in modes:
        modes[mode] = torch.compile(model.forward if in_place else model, mode=mode)
    return modes[mode]


CAPACITY_BUCKET = 256  # compile=true: static caches are sized in multiples of this many positions


def step_capacity(model: ZooModel, input_ids: torch.Tensor, config: GenerationConfig) -> int | None:
    """Positions a static cache needs: the prompt (decoder-only) or [BOS] (encoder-decoder)
    plus the new tokens; None without static_cache. With compile=true the size is rounded up to
    a multiple of CAPACITY_BUCKET (at most model.max_seq_len, unless the need is larger), so
    prompts of other lengths reuse the compiled step and its CUDA graph instead of recompiling."""
    if not (config.static_cache and config.use_cache):
        return None
    first = 1 if FAMILY_FACTS[model.config.family].cross_attention else input_ids.shape[1]
    need = first + config.max_new_tokens
    if not config.compile:
        return need
    bucketed = -(-need // CAPACITY_BUCKET) * CAPACITY_BUCKET
    return max(need, min(bucketed, model.config.max_seq_len))


@torch.no_grad()
def generate(
    model: ZooModel,
    input_ids: torch.Tensor,
    *,
    attention_mask: torch.Tensor | None = None,
    config: GenerationConfig | None = None,
    max_new_tokens: int | None = None,
    bos_id: int | None = None,
    eos_id: int | None = None,
    pad_id: int = 0,
    use_cache: bool | None = None,
    vocab_limit: int | None = None,
    on_step: Callable[[torch.Tensor | None], None] | None = None,
    stop: Callable[[torch.Tensor], bool] | None = None,
    draft: MultiTokenPrediction | None = None,
) -> torch.Tensor:
    """New tokens (B, N) for each input row, N <= max_new_tokens; after a row's eos_id the rest
    of it is pad_id.

    Decoder-only: input_ids (B, T) prompts, left-padded, attention_mask (B, T) with 0 on pads.
    Encoder-decoder: input_ids (B, S) sources, attention_mask (B, S); the target starts with
    bos_id. `vocab_limit` keeps ids below the tokenizer's size when the model's table is larger.
    Keyword options override the same fields of `config` (default: greedy). `on_step` is called
    after every decoding step: with the tokens (B,) just chosen (pad_id for ended rows) under
    greedy and sample, with None under beam, whose tokens are known only at the end. `stop`
    (greedy and sample) decides from the rows' ended flags (B,) whether decoding ends (default:
    when every row has ended); a model sharded over ranks passes one that agrees across them.
    `draft`: the multi-token prediction modules config.speculative=true drafts with
    (`zoo.models.speculative`; the same output as greedy).
    """
    config = config or GenerationConfig()
    if max_new_tokens is not None or use_cache is not None:
        values = {f.name: getattr(config, f.name) for f in fields(config)}
        if max_new_tokens is not None:
            values["max_new_tokens"] = max_new_tokens
        if use_cache is not None:
            values["use_cache"] = use_cache
        config = GenerationConfig(**values)
    if not FAMILY_FACTS[model.config.family].decoder:
        raise ValueError("an encoder-only model cannot generate; use a decoder-only or encoder-decoder model")
    if config.speculative:
        check_speculative(model, draft)
        assert draft is not None  # checked
        return speculative_generate(
            model,
            draft,
            input_ids,
            attention_mask=attention_mask,
            max_new_tokens=config.max_new_tokens,
            eos_id=eos_id,
            pad_id=pad_id,
            vocab_limit=vocab_limit,
            on_step=on_step,
        )[0]
    was_training = model.training
    model.eval()
    try:
        if config.strategy == Strategy.beam:
            if stop is not None:  # each row ends by its own beams: ranks could step apart
                raise ValueError("stop= applies to greedy and sample decoding, not beam")
            return _beam_search(model, input_ids, attention_mask, config, bos_id, eos_id, pad_id, vocab_limit, on_step)
        return _greedy_or_sample(
            model, input_ids, attention_mask, config, bos_id, eos_id, pad_id, vocab_limit, on_step, stop
        )
    finally:
        model.train(was_training)


def choose_greedy(logits: torch.Tensor, state: torch.Tensor, vocab_limit: int | None) -> torch.Tensor:
    """One greedy choice on the device, with no host read: logits (B, V) and the decoding state
    (2B + 4,) long, [the tokens last chosen (B) | the rows' ended flags (B) | the step after which
    every row had ended | the step count | eos (-1: none) | pad] -> the next state."""
    return _advance(logits[:, :vocab_limit].argmax(-1), state)


def choose_sampled(
    logits: torch.Tensor,
    state: torch.Tensor,
    u: torch.Tensor,
    vocab_limit: int | None,
    *,
    temperature: float,
    top_k: int,
    top_p: float,
) -> torch.Tensor:
    """One sampled choice on the device, with no host read: the filtered distribution of logits
    (B, V) (`filter_logits`) drawn by its inverse CDF at u (B,), uniform in [0, 1): the first
    token whose cumulative probability passes u times the total, so a filtered-out token (mass 0)
    is never drawn. state as `choose_greedy`'s -> the next state."""
    probs = filter_logits(logits[:, :vocab_limit].float(), temperature=temperature, top_k=top_k, top_p=top_p).softmax(
        -1
    )  # (B, V)
    cdf = probs.cumsum(-1)  # (B, V)
    at = (u.to(cdf.dtype) * cdf[:, -1])[:, None]  # (B, 1)
    nxt = torch.searchsorted(cdf, at, right=True)[:, 0].clamp(max=cdf.shape[-1] - 1)  # (B,)
    return _advance(nxt, state)


def _advance(nxt: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """The state after the tokens nxt (B,) were chosen: pad where a row had ended, the ended
    flags, the step after which every row had ended, the step count."""
    B = nxt.shape[0]
    done, ended_at, t = state[B : 2 * B].bool(), state[2 * B], state[2 * B + 1]  # (B,), (), ()
    eos, pad = state[2 * B + 2], state[2 * B + 3]  # (), ()
    nxt = torch.where(done, pad, nxt)
    done = done | (nxt == eos)
    ended_at = torch.where(done.all() & (ended_at > t), t, ended_at)
    return torch.cat([nxt, done.long(), ended_at[None], (t + 1)[None], state[2 * B + 2 :]])  # (2B + 4,)


def decode_step(
    model: ZooModel, *, cuda_graphs: bool, sampling: tuple[float, int, float] | None = None
) -> Callable[..., torch.Tensor]:
    """The whole decoding step compiled as one function: the model's step over a static cache
    (its slot update inside), the choice of the token (the argmax, `choose_greedy`; or, with
    `sampling` = (temperature, top_k, top_p), the draw at a given uniform, `choose_sampled`),
    the pad and end bookkeeping. With cuda_graphs (mode "reduce-overhead") a step is one CUDA
    graph replay: nothing runs between replays but the copy of the state the last replay
    returned. Made once per model and sampling rule."""
    modes = model.__dict__.setdefault(COMPILED_ATTR, {})
    key = ("greedy-step" if sampling is None else f"sample-step {sampling}") + (" cuda-graphs" if cuda_graphs else "")
    if key not in modes:
        forward = model.forward if getattr(model, "_compiled_call_impl", None) is not None else model

        def step(state: torch.Tensor, cache: Cache, vocab_limit: int | None, u: torch.Tensor | None = None):
            B = (state.shape[0] - 4) // 2
            out = forward(state[:B, None], cache=cache, use_cache=True, return_logits=True)  # logits (B, 1, V)
            if sampling is None or u is None:
                return choose_greedy(out.logits[:, -1], state, vocab_limit)
            temperature, top_k, top_p = sampling
            return choose_sampled(
                out.logits[:, -1], state, u, vocab_limit, temperature=temperature, top_k=top_k, top_p=top_p
            )

        # the argmax fused into the logits' kernel compares them as the unfused model rounds them
        # (bf16 with a soft-cap: ties in bf16 that float32 would break), so the tokens are the loop's
        options: dict[str, str | int | bool | Callable[..., Any]] = {"emulate_precision_casts": True}
        if cuda_graphs:
            options["triton.cudagraphs"] = True
        modes[key] = torch.compile(step, options=options)  # mode "reduce-overhead" is triton.cudagraphs
    return modes[key]


def _fused(stepper: _Stepper, config, eos_id, pad_id, vocab_limit, on_step, stop) -> torch.Tensor:
    """Greedy or sampled decoding whose every step after the prompt is `decode_step`: a
    decoder-only model, a static cache, no padding mask, compile=true. Greedy: the same tokens as
    the loop below. Sampled: every step's uniform drawn before the first, from the generator
    seeded as the loop's, and the token taken by its inverse CDF inside the step (the same
    distribution as the loop's `torch.multinomial`, not the same tokens for a seed)."""
    B = stepper.context.shape[0]
    device = stepper.context.device
    tail = [config.max_new_tokens, 0, -1 if eos_id is None else eos_id, pad_id]  # ended_at, t, eos, pad
    # filled on the device (no copy from the host, which a GPU would wait for)
    state = torch.zeros(2 * B + 4, dtype=torch.long, device=device)  # (2B + 4,) see choose_greedy
    for i, value in enumerate(tail):
        state[2 * B + i].fill_(value)
    sampling, uniforms = None, None
    if config.strategy == Strategy.sample:
        sampling = (float(config.temperature), int(config.top_k), float(config.top_p))
        generator = torch.Generator(device=device)
        generator.manual_seed(config.seed if config.seed is not None else torch.seed())
        uniforms = torch.rand(config.max_new_tokens, B, generator=generator, device=device)  # (N, B)
        state = choose_sampled(
            stepper.start(),
            state,
            uniforms[0],
            vocab_limit,
            temperature=sampling[0],
            top_k=sampling[1],
            top_p=sampling[2],
        )  # the first token, eagerly
    else:
        state = choose_greedy(stepper.start(), state, vocab_limit)  # the first token, eagerly
    step = decode_step(stepper.model, cuda_graphs=device.type == "cuda", sampling=sampling)
    out = []
    for t in range(config.max_new_tokens):
        if t > 0:
            # a CUDA graph's output is overwritten by its next replay: keep a copy
            u = uniforms[t] if uniforms is not None else None
            state = step(state, stepper.cache, vocab_limit, u).clone()
        out.append(state[:B])
        if on_step is not None:
            on_step(state[:B])
        if eos_id is not None:
            last = t + 1 == config.max_new_tokens
            if (t + 1) % config.stop_every == 0 or last:
                done = state[B : 2 * B].bool()
                if stop(done) if stop is not None else bool(done.all()):
                    return torch.stack(out[: int(state[2 * B]) + 1], dim=1)  # (B, N)
    return torch.stack(out, dim=1)  # (B, N)


def _greedy_or_sample(
    model, input_ids, attention_mask, config, bos_id, eos_id, pad_id, vocab_limit, on_step, stop=None
):
    stepper = _Stepper(
        model,
        input_ids,
        attention_mask,
        bos_id=bos_id,
        use_cache=config.use_cache,
        capacity=step_capacity(model, input_ids, config),
        compile=config.compile,
    )
    if (
        config.compile
        and config.strategy in (Strategy.greedy, Strategy.sample)
        and stepper.capacity is not None
        and stepper.mask is None
        and not stepper.encoder_decoder
    ):
        return _fused(stepper, config, eos_id, pad_id, vocab_limit, on_step, stop)
    B = input_ids.shape[0]
    done = torch.zeros(B, dtype=torch.bool, device=input_ids.device)
    # the first step after which every row had ended, kept on the device: the loop reads the host
    # only when it asks `stop`, once every `stop_every` steps
    ended_at = torch.full((), config.max_new_tokens, dtype=torch.long, device=input_ids.device)
    generator = None
    if config.strategy == Strategy.sample:
        generator = torch.Generator(device=input_ids.device)
        generator.manual_seed(config.seed if config.seed is not None else torch.seed())
    out = []
    logits = stepper.start()
    for t in range(config.max_new_tokens):
        logits = logits[:, :vocab_limit] if vocab_limit is not None else logits
        if config.strategy == Strategy.sample:
            filtered = filter_logits(
                logits.float(), temperature=config.temperature, top_k=config.top_k, top_p=config.top_p
            )
            nxt = torch.multinomial(filtered.softmax(-1), 1, generator=generator)[:, 0]  # (B,)
        else:
            nxt = logits.argmax(-1)  # (B,)
        nxt = torch.where(done, torch.full_like(nxt, pad_id), nxt)
        out.append(nxt)
        if on_step is not None:
            on_step(nxt)
        if eos_id is not None:
            done = done | (nxt == eos_id)
            ended_at = torch.where(done.all() & (ended_at > t), t, ended_at)
            last = t + 1 == config.max_new_tokens
            if ((t + 1) % config.stop_every == 0 or last) and (stop(done) if stop is not None else bool(done.all())):
                # the steps since every row ended hold pad only: cut them (this read follows the one
                # just made, so the queue is already drained)
                return torch.stack(out[: int(ended_at) + 1], dim=1)  # (B, N)
        if t + 1 < config.max_new_tokens:
            logits = stepper.step(nxt)
    return torch.stack(out, dim=1)  # (B, N)


def beam_search(
    step: Callable[[torch.Tensor | None, torch.Tensor | None], torch.Tensor],
    *,
    batch: int,
    num_beams: int,
    max_new_tokens: int,
    eos_id: int | None,
    length_penalty: float = 1.0,
    early_stopping: bool = False,
    on_step: Callable[[None], None] | None = None,
) -> list[tuple[list[int], float]]:
    """Beam search over a step function (the model-independent part, testable on fixed
    distributions).

    `step(tokens, reorder)`: called first with (None, None) for the log-probabilities of the
    first token, then with the chosen tokens (batch·num_beams,) and the rows they extend
    (batch·num_beams,); returns log-probabilities (batch·num_beams, V). Returns the best
    hypothesis per input: (tokens, score = summed log p / length^length_penalty); an ended
    hypothesis includes eos_id. `on_step(None)` is called after each step.
    """
    K = num_beams
    scores = torch.full((batch, K), float("-inf"))
    scores[:, 0] = 0.0  # all beams start identical: expand only the first
    beams: list[list[list[int]]] = [[[] for _ in range(K)] for _ in range(batch)]
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]
    done = [False] * batch
    logp = step(None, None)  # (batch·K, V)
    for t in range(max_new_tokens):
        V = logp.shape[-1]
        total = scores.to(logp.device)[:, :, None] + logp.view(batch, K, V)  # (batch, K, V)
        top_scores, top_index = total.view(batch, K * V).topk(min(2 * K, K * V), dim=-1)  # (batch, 2K)
        next_tokens = torch.zeros(batch, K, dtype=torch.long)
        next_rows = torch.zeros(batch, K, dtype=torch.long)
        new_scores = torch.full((batch, K), float("-inf"))
        new_beams: list[list[list[int]]] = []
        for b in range(batch):
            kept: list[list[int]] = []
            if not done[b]:
                for score, index in zip(top_scores[b].tolist(), top_index[b].tolist()):
                    beam, token = divmod(index, V)
                    if score == float("-inf"):
                        break
                    hyp = beams[b][beam] + [token]
                    if eos_id is not None and token == eos_id:
                        if len(finished[b]) < K or score / len(hyp) ** length_penalty > min(s for s, _ in finished[b]):
                            finished[b].append((score / len(hyp) ** length_penalty, hyp))
                            finished[b] = sorted(finished[b], key=lambda x: -x[0])[:K]
                        continue
                    slot = len(kept)
                    next_tokens[b, slot], next_rows[b, slot] = token, b * K + beam
                    new_scores[b, slot] = score
                    kept.append(hyp)
                    if len(kept) == K:
                        break
            if len(kept) < K:  # an ended input keeps feeding its rows (their output is unused)
                for slot in range(len(kept), K):
                    next_rows[b, slot] = b * K
            new_beams.append(kept + [[] for _ in range(K - len(kept))])
            if not done[b] and len(finished[b]) >= K:
                if early_stopping:
                    done[b] = True
                else:
                    best_running = new_scores[b].max().item()
                    best_possible = best_running / (t + 1) ** length_penalty if length_penalty > 0 else best_running
                    done[b] = best_possible <= min(s for s, _ in finished[b])
            if not kept:
                done[b] = True
        beams, scores = new_beams, new_scores
        if on_step is not None:
            on_step(None)
        if all(done) or t + 1 == max_new_tokens:
            break
        logp = step(next_tokens.view(-1), next_rows.view(-1))
    results = []
    for b in range(batch):
        candidates = list(finished[b])
        for k in range(K):  # running beams compete too (an input cut by max_new_tokens)
            if scores[b, k] > float("-inf") and beams[b][k]:
                candidates.append((scores[b, k].item() / len(beams[b][k]) ** length_penalty, beams[b][k]))
        best_score, best = max(candidates, key=lambda x: x[0]) if candidates else (float("-inf"), [])
        results.append((best, best_score))
    return results


def _beam_search(model, input_ids, attention_mask, config, bos_id, eos_id, pad_id, vocab_limit, on_step):
    B, K = input_ids.shape[0], config.num_beams
    stepper = _Stepper(
        model,
        input_ids,
        attention_mask,
        bos_id=bos_id,
        use_cache=config.use_cache,
        repeat=K,
        capacity=step_capacity(model, input_ids, config),
        compile=config.compile,
    )

    def step(tokens, rows):
        if tokens is None:
            logits = stepper.start()
        else:
            stepper.reorder(rows.to(input_ids.device))
            logits = stepper.step(tokens.to(input_ids.device))
        logits = logits[:, :vocab_limit] if vocab_limit is not None else logits
        return torch.log_softmax(logits.float(), dim=-1).cpu()  # (B·K, V)

    results = beam_search(
        step,
        batch=B,
        num_beams=K,
        max_new_tokens=config.max_new_tokens,
        eos_id=eos_id,
        length_penalty=config.length_penalty,
        early_stopping=config.early_stopping,
        on_step=on_step,
    )
    width = max(1, max(len(tokens) for tokens, _ in results))
    out = torch.full((B, width), pad_id, dtype=torch.long)
    for b, (tokens, _) in enumerate(results):
        out[b, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
    return out.to(input_ids.device)


def strip_special(rows: torch.Tensor, eos_id: int | None, pad_id: int) -> list[list[int]]:
    """Generated ids per row up to (not including) eos, without padding."""
    out = []
    for row in rows.tolist():
        if eos_id is not None and eos_id in row:
            row = row[: row.index(eos_id)]
        out.append([t for t in row if t != pad_id])
    return out


__all__ = ["GenerationConfig", "Strategy", "beam_search", "filter_logits", "generate", "strip_special"]
