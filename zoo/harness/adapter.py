"""`ZooLM`: a zoo model and its run's tokenizer as an lm-evaluation-harness language model
(registered with the harness as model "zoo").

The harness asks three things of a model; each runs batched, on the device the model is on:

- `loglikelihood`: the log-probability of a continuation after a context, and whether greedy
  decoding would have produced it. The harness's own `TemplateLM` splits each request into
  context and continuation tokens exactly as its Hugging Face backend does (the whole text is
  encoded, the context's tokens cut off the front), so the two backends score the same tokens.
  Requests that share a context (the choices of a multiple-choice question) run the context once
  where it is long beside the choices (a few-shot prompt): its KV cache (`zoo.nn.cache`) is
  copied to one row per choice, and only the choices' tokens run after it. An encoder-decoder
  model encodes each context once and scores the continuation as its target, starting from BOS,
  as zoo's seq2seq training does.
- `loglikelihood_rolling`: a whole text's log-probability in windows of the model's length, each
  token predicted once (the harness's `get_rolling_token_windows`), the first after EOS.
- `generate_until`: greedy or sampled continuations over zoo's KV-cached decoding
  (`zoo.models.generate.generate`), stopped at EOS, at any of the request's `until` strings or
  after `max_gen_toks` tokens.

A document's first token is predicted after EOS: zoo's training streams end every document with
EOS (`zoo.data.tokenize`), as the harness's default prefix token assumes. An encoder-only model
cannot score continuations: it is refused on one line."""

from __future__ import annotations

from typing import TypeVar

import torch
import torch.nn.functional as F
from lm_eval import utils
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model

from zoo.config.errors import ConfigError
from zoo.config.facts.families import FAMILY_FACTS
from zoo.config.facts.positions import max_positions
from zoo.config.schema.generation import GenerationConfig, Strategy
from zoo.data.prompts import continue_text
from zoo.harness.run import DEFAULT_MAX_GEN_TOKS
from zoo.models.generate import generate

NAME = "zoo"  # the harness's name for this model
DEFAULT_MAX_LENGTH = 2048  # the harness's default, for a model that states no length
# a context shared by several continuations runs once when it is at least this many times as
# long as the longest of them; shorter, the continuations' padding to the longest and the
# masked attention over the cache cost about what the context saves (a 0-shot kjv_next_verse,
# its context about a choice's length, ran slower shared; benchmarks/harness_cost.py)
SHARE_RATIO = 2
_T = TypeVar("_T")


def _filled(answers: list[_T | None]) -> list[_T]:
    """The answers of a batch of requests, every one of them given."""
    assert all(a is not None for a in answers), "a request was left without its answer"
    return [a for a in answers if a is not None]


def _wide(logits: torch.Tensor) -> torch.Tensor:
    """Logits in float32 at least (bfloat16 ones widened; float64 kept) for the log-softmax."""
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


@register_model(NAME)
class ZooLM(TemplateLM):
    """`model`: a zoo model (decoder-only or encoder-decoder); `tokenizer`: its run's zoo
    tokenizer. `batch_size`: sequences per forward; `max_length`: tokens a forward sees
    (default: the model's positions, or model.max_seq_len where they are unbounded, as an export
    states it); `share_context` false runs every request whole, as the harness's Hugging Face
    backend does (the benchmark's comparison)."""

    def __init__(
        self,
        model,
        tokenizer,
        *,
        batch_size: int = 16,
        max_length: int | None = None,
        max_gen_toks: int = DEFAULT_MAX_GEN_TOKS,
        share_context: bool = True,
    ) -> None:
        super().__init__()
        facts = FAMILY_FACTS[model.config.family]
        if not facts.decoder:
            raise ConfigError(
                f"the harness scores continuations and a {model.config.family.value} model has no "
                f"decoder; evaluate a decoder-only or encoder-decoder checkpoint"
            )
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.tokenizer_zoo = tokenizer
        self.encoder_decoder = facts.cross_attention
        self.backend = "seq2seq" if self.encoder_decoder else "causal"
        self.batch_size = int(batch_size)
        # a bounded scheme's positions, else model.max_seq_len (what an export's
        # max_position_embeddings says, and the harness's Hugging Face backend reads)
        bound = max_positions(model.config) or getattr(model.config, "max_seq_len", None)
        self._max_length = int(max_length or bound or DEFAULT_MAX_LENGTH)
        self.max_gen_toks = int(max_gen_toks)
        self.share_context = bool(share_context)
        specials = tokenizer.special_ids()
        self.eos_id, self.bos_id = specials["eos"], specials["bos"]
        self.pad_id = specials["pad"] if specials["pad"] is not None else 0  # pads are masked or ignored
        if self.eos_id is None:
            raise ConfigError(
                "the run's tokenizer has no eos token: the harness predicts a document's first token after it"
            )
        if self.encoder_decoder and self.bos_id is None:
            raise ConfigError("an encoder-decoder model starts its target from bos, and the run's tokenizer has none")

    # the harness's questions about the model

    @property
    def eot_token_id(self) -> int:
        return self.eos_id

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def tokenizer_name(self) -> str:
        return f"zoo-{self.tokenizer_zoo.kind}-{self.tokenizer_zoo.digest()[:12]}"

    def get_model_info(self) -> dict:
        return {"model_family": self.model.config.family.value, "tokenizer": self.tokenizer_name}

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        """The run's tokenizer; an encoder-decoder's source ends with EOS, as its training sources do."""
        ids = self.tokenizer_zoo.encode(string)
        if self.encoder_decoder and add_special_tokens is not False:
            ids = ids + [self.eos_id]
        return ids

    def tok_decode(self, ids) -> str:
        return self.tokenizer_zoo.decode(ids)

    # loglikelihood

    @torch.no_grad()
    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        """requests: ((context, continuation) or None, context ids, continuation ids) each."""
        was_training = self.model.training
        self.model.eval()
        try:
            scored = self._seq2seq_scores(requests) if self.encoder_decoder else self._causal_scores(requests)
        finally:
            self.model.train(was_training)
        out = []
        for (pair, _, _), answer in zip(requests, scored):
            out.append(answer)
            if pair is not None and pair[0] is not None:
                self.cache_hook.add_partial("loglikelihood", pair, answer)
        return out

    def _causal_scores(self, requests) -> list[tuple[float, bool]]:
        """Decoder-only: requests that share a context at least SHARE_RATIO times as long as the
        longest of their continuations, and that fit whole, run the context once
        (`_shared_context`); the others run whole, cut on the left to max_length + 1 tokens."""
        answers: list[tuple[float, bool] | None] = [None] * len(requests)
        groups: dict[tuple[int, ...], list[int]] = {}
        alone = []
        for i, (_, context, continuation) in enumerate(requests):
            if self.share_context and len(context) + len(continuation) <= self.max_length + 1 and context:
                groups.setdefault(tuple(context), []).append(i)
            else:
                alone.append(i)
        shared = []
        for context, members in groups.items():
            longest = max(len(requests[i][2]) for i in members)
            if len(members) > 1 and len(context) >= SHARE_RATIO * longest:
                shared.append((context, members))
            else:
                alone += members
        shared.sort(key=lambda g: -len(g[0]))  # similar lengths together: little padding
        batch: list[tuple[tuple[int, ...], list[int]]] = []
        for group in shared:
            if batch and sum(len(m) for _, m in batch) + len(group[1]) > self.batch_size:
                self._shared_context(batch, requests, answers)
                batch = []
            batch.append(group)
        if batch:
            self._shared_context(batch, requests, answers)
        alone.sort(key=lambda i: -(len(requests[i][1]) + len(requests[i][2])))
        for start in range(0, len(alone), self.batch_size):
            self._whole(alone[start : start + self.batch_size], requests, answers)
        return _filled(answers)

    def _whole(self, index: list[int], requests, answers) -> None:
        """Each request as one right-padded row: (context + continuation)[:-1] in, cut on the left
        to max_length tokens as the harness's Hugging Face backend cuts it, the continuation's
        tokens scored at the last positions (only the last max_length of them where the
        continuation alone is longer)."""
        rows, lengths = [], []
        for i in index:
            _, context, continuation = requests[i]
            whole = (list(context) + list(continuation))[-(self.max_length + 1) :]
            rows.append(whole[:-1])
            lengths.append(len(continuation))
        ids = self._right_padded(rows)  # (B, T)
        logp = F.log_softmax(_wide(self.model(ids).logits), dim=-1)  # (B, T, V)
        for row, i, n, tokens in zip(range(len(index)), index, lengths, rows):
            end, seen = len(tokens), min(n, len(tokens))  # a continuation longer than the window: its last tokens
            answers[i] = self._score(logp[row, end - seen : end], list(requests[i][2])[n - seen :])

    def _shared_context(self, batch, requests, answers) -> None:
        """Contexts left-padded (G, Tc) run once with a KV cache; the cache is copied to one row
        per continuation (R rows) and the continuations (all but their last token) run after it,
        right-padded (R, Tn). A continuation's first token is scored from its context's last
        position."""
        contexts = [list(c) for c, _ in batch]
        width = max(len(c) for c in contexts)
        ids = torch.full((len(contexts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros(len(contexts), width, dtype=torch.long)
        for g, context in enumerate(contexts):
            ids[g, width - len(context) :] = torch.tensor(context)
            mask[g, width - len(context) :] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        padded = not bool(mask.all())
        out = self.model(ids, attention_mask=mask if padded else None, use_cache=True, return_logits=False)
        first = F.log_softmax(_wide(self.model.logits(out.hidden_states[:, -1])), dim=-1)  # (G, V)
        members = [(g, i) for g, (_, index) in enumerate(batch) for i in index]
        rows = torch.tensor([g for g, _ in members], device=self.device)  # (R,) each continuation's context
        cache = out.cache
        cache.reorder(rows)
        tails = [list(requests[i][2])[:-1] for _, i in members]
        rest = None
        if max(len(t) for t in tails) > 0:
            tail_ids = self._right_padded(tails)  # (R, Tn)
            tail_mask = None
            if padded:  # the contexts' padding, then every continuation token (right pads are never attended)
                tail_mask = torch.cat([mask[rows], torch.ones_like(tail_ids)], dim=1)  # (R, Tc + Tn)
            rest = self.model(tail_ids, attention_mask=tail_mask, cache=cache, use_cache=True).logits
            rest = F.log_softmax(_wide(rest), dim=-1)  # (R, Tn, V)
        for r, (g, i) in enumerate(members):
            continuation = requests[i][2]
            n = len(continuation)
            logp = first[g][None] if n == 1 or rest is None else torch.cat([first[g][None], rest[r, : n - 1]])
            answers[i] = self._score(logp, continuation)

    def _seq2seq_scores(self, requests) -> list[tuple[float, bool]]:
        """Encoder-decoder: each batch's distinct contexts encoded once, right-padded (G, S); the
        target [bos] + continuation[:-1] (B, T) scored against the continuation."""
        answers: list[tuple[float, bool] | None] = [None] * len(requests)
        order = sorted(range(len(requests)), key=lambda i: (-len(requests[i][1]), tuple(requests[i][1])))
        for start in range(0, len(order), self.batch_size):
            index = order[start : start + self.batch_size]
            contexts: dict[tuple[int, ...], int] = {}
            for i in index:
                contexts.setdefault(tuple(requests[i][1][-self.max_length :]), len(contexts))
            sources = [list(c) for c in contexts]
            src = self._right_padded(sources)  # (G, S)
            src_mask = self._right_padded([[1] * len(s) for s in sources], pad=0)  # (G, S)
            memory = self.model.encode(src, src_mask)  # (G, S, D)
            rows = torch.tensor(
                [contexts[tuple(requests[i][1][-self.max_length :])] for i in index], device=self.device
            )
            targets = [[self.bos_id] + list(requests[i][2])[:-1] for i in index]
            tgt = self._right_padded(targets)  # (B, T)
            logits = self.model(
                decoder_input_ids=tgt, encoder_hidden_states=memory[rows], attention_mask=src_mask[rows]
            ).logits
            logp = F.log_softmax(_wide(logits), dim=-1)  # (B, T, V)
            for row, i in enumerate(index):
                answers[i] = self._score(logp[row, : len(requests[i][2])], requests[i][2])
        return _filled(answers)

    def _right_padded(self, rows: list[list[int]], pad: int | None = None) -> torch.Tensor:
        width = max(1, max(len(r) for r in rows))
        out = torch.full((len(rows), width), self.pad_id if pad is None else pad, dtype=torch.long)
        for i, row in enumerate(rows):
            if row:
                out[i, : len(row)] = torch.tensor(row)
        return out.to(self.device)

    @staticmethod
    def _score(logp: torch.Tensor, continuation) -> tuple[float, bool]:
        """logp (n, V) at the positions predicting the n continuation tokens -> (sum log p, greedy)."""
        target = torch.tensor(list(continuation), device=logp.device)
        picked = logp.gather(-1, target[:, None])[:, 0]  # (n,)
        return float(picked.sum()), bool((logp.argmax(-1) == target).all())

    # rolling loglikelihood

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        windows, owners = [], []
        for n, (string,) in enumerate(req.args for req in requests):
            for window in map(
                utils.make_disjoint_window,
                utils.get_rolling_token_windows(
                    token_list=self.tokenizer_zoo.encode(string),
                    prefix_token=self.prefix_token_id,
                    max_seq_len=self.max_length,
                    context_len=1,
                ),
            ):
                windows.append((None,) + window)
                owners.append(n)
        totals = [0.0] * len(requests)
        for owner, (logp, _) in zip(owners, self._loglikelihood_tokens(windows)):
            totals[owner] += logp
        for req, total in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", (req.args[0],), total)
        return totals

    # generation

    @torch.no_grad()
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Requests with the same options decode together, batch_size at a time."""
        outputs: list[str | None] = [None] * len(requests)
        by_options: dict[str, list[int]] = {}
        for i, req in enumerate(requests):
            by_options.setdefault(repr(sorted(req.args[1].items())), []).append(i)
        for index in by_options.values():
            options = dict(requests[index[0]].args[1])
            until = options.pop("until", None) or []
            until = [until] if isinstance(until, str) else list(until)
            max_new = int(options.pop("max_gen_toks", self.max_gen_toks))
            sample = bool(options.pop("do_sample", False)) and float(options.get("temperature", 1.0)) > 0
            if sample:
                temperature = float(options.get("temperature", 1.0))
                config = GenerationConfig(strategy=Strategy.sample, max_new_tokens=max_new, temperature=temperature)
            else:
                config = GenerationConfig(strategy=Strategy.greedy, max_new_tokens=max_new)
            index = sorted(index, key=lambda i: -len(requests[i].args[0]))
            for start in range(0, len(index), self.batch_size):
                chunk = index[start : start + self.batch_size]
                texts = self._generate([requests[i].args[0] for i in chunk], config, until)
                for i, text in zip(chunk, texts):
                    outputs[i] = text
                    self.cache_hook.add_partial("generate_until", requests[i].args, text)
        return _filled(outputs)

    def _generate(self, contexts: list[str], config, until: list[str]) -> list[str]:
        """Prompts left-padded (decoder-only, cut on the left to leave room for the new tokens)
        or right-padded (sources); decoding ends when every row has ended or shows a stop string."""
        keep = max(1, self.max_length - config.max_new_tokens)
        rows = [self.tok_encode(c)[-keep:] or [self.eos_id] for c in contexts]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros(len(rows), width, dtype=torch.long)
        for i, row in enumerate(rows):
            span = slice(0, len(row)) if self.encoder_decoder else slice(width - len(row), width)
            ids[i, span], mask[i, span] = torch.tensor(row), 1
        steps: list[torch.Tensor] = []

        def chosen(tokens: torch.Tensor | None) -> None:  # greedy and sample: the tokens (B,) of a step
            assert tokens is not None  # (None is beam search's, which the harness never asks for)
            steps.append(tokens)

        def stopped(done: torch.Tensor) -> bool:  # every row ended, or has written a stop string
            if bool(done.all()):
                return True
            if not until:
                return False
            new = torch.stack(steps, dim=1).tolist()  # (B, N)
            return all(bool(d) or any(u in self.tok_decode(row) for u in until) for d, row in zip(done, new))

        new = generate(
            self.model,
            ids.to(self.device),
            attention_mask=mask.to(self.device),
            config=config,
            bos_id=self.bos_id,
            eos_id=self.eos_id,
            pad_id=self.pad_id,
            vocab_limit=self.tokenizer_zoo.vocab_size,
            on_step=chosen,
            stop=stopped,
        )
        texts = []
        for context, row in zip(contexts, new.tolist()):
            if self.eos_id in row:
                row = row[: row.index(self.eos_id)]
            # decoded after the prompt, so a piece's leading space is kept (`continue_text`)
            text = (
                self.tok_decode(row)
                if self.encoder_decoder
                else continue_text(self.tokenizer_zoo, context, row)[len(context) :]
            )
            for stop in until:
                if stop:
                    text = text.split(stop)[0]
            texts.append(text)
        return texts
