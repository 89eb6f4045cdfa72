"""Self-speculative greedy decoding with multi-token prediction modules (`zoo.models.mtp`;
DeepSeek-V3 §2.2 notes the modules can serve speculative decoding, as Stern et al. 2018's
blockwise parallel decoding and Leviathan et al. 2023 do with other drafters).

Each round, with tokens t_0..t_m known and the model's KV cache holding positions 0..m-1:

1. draft: module 1 at position m-1 reads h^0_{m-1} and Emb(t_m) and its head drafts d_{m+1};
   module k reads module k-1's state there and Emb(d_{m+k-1}), drafting d_{m+k} (k = 1..D);
2. verify: the model runs [t_m, d_{m+1}, ..., d_{m+D}] in one forward over its cache; its
   greedy choices g_{m+1}..g_{m+D+1} accept the longest prefix of drafts equal to them, then
   g after it (so every round adds at least one token);
3. roll back: the model's cache keeps the accepted positions only.

Every token added is the model's own greedy choice after the tokens before it, so the output is
exactly plain greedy decoding's (the drafts decide only how many tokens one forward adds). Each
module keeps a KV cache of the positions whose inputs are all known tokens; the positions that
read drafts are computed again in the next round. One row at a time; a growing full-attention
cache (a sliding window's cache drops keys it would need back)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from zoo.models.base import ZooModel
from zoo.models.mtp import MultiTokenPrediction
from zoo.nn.cache import Cache, KVCache, LayerCache


@dataclass
class SpeculativeStats:
    """What a speculative decode did: `rounds` model forwards after the prompt, `drafted` draft
    tokens verified, `accepted` of them kept, `tokens` new tokens in all."""

    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    tokens: int = 0
    per_depth: list[int] = field(default_factory=list)  # accepted drafts by depth k (index k-1)
    drafted_by_depth: list[int] = field(default_factory=list)  # drafts made by depth k

    @property
    def acceptance_by_depth(self) -> list[float]:
        """The share of depth k's drafts accepted, for k = 1..D (depth k's is accepted only
        after depth k-1's)."""
        return [a / d if d else 0.0 for a, d in zip(self.per_depth, self.drafted_by_depth)]

    @property
    def acceptance(self) -> float:
        """The share of drafted tokens accepted."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def tokens_per_forward(self) -> float:
        """New tokens per model forward after the prompt's (plain greedy: 1)."""
        return self.tokens / self.rounds if self.rounds else 0.0

    def add(self, other: SpeculativeStats) -> None:
        self.rounds += other.rounds
        self.drafted += other.drafted
        self.accepted += other.accepted
        self.tokens += other.tokens
        self.per_depth = _added(self.per_depth, other.per_depth)
        self.drafted_by_depth = _added(self.drafted_by_depth, other.drafted_by_depth)


def _added(a: list[int], b: list[int]) -> list[int]:
    """Two counts by depth added, the shorter padded with zeros."""
    width = max(len(a), len(b))
    return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(width)]


def check_speculative(model: ZooModel, mtp: MultiTokenPrediction | None) -> None:
    """ValueError, one line, where the model cannot decode this way."""
    if mtp is None:
        raise ValueError(
            "speculative decoding drafts with multi-token prediction modules; train with task.mtp_depth >= 1"
        )
    if any(w is not None for w in getattr(model.decoder, "windows", [])):
        raise ValueError("speculative decoding rolls back the KV cache; a sliding-window layer's cache cannot")
    if any(getattr(model.decoder, "recurrent", [])):
        raise ValueError(
            "speculative decoding rolls back the cache; a recurrent layer's state cannot (it keeps no past)"
        )


def _truncate(cache: Cache | LayerCache, length: int) -> None:
    """Keep the first `length` positions of a growing cache (every layer's)."""
    layers = cache.layers if isinstance(cache, Cache) else [cache]
    for layer in layers:
        kv = layer.self_attn
        if type(kv) is not KVCache:
            raise ValueError(f"speculative decoding rolls back a growing cache, not a {type(kv).__name__}")
        kv.length = min(kv.length, length)


def _greedy(logits: torch.Tensor, vocab_limit: int | None) -> torch.Tensor:
    return (logits[..., :vocab_limit] if vocab_limit is not None else logits).argmax(-1)


class _Drafter:
    """The modules' caches and their states at the positions whose inputs are known tokens."""

    def __init__(self, model: ZooModel, mtp: MultiTokenPrediction) -> None:
        self.model, self.mtp = model, mtp
        self.position = mtp.position(model)
        self.caches = [LayerCache(self_attn=KVCache()) for _ in mtp.layers]
        self.kept: list[torch.Tensor | None] = [None] * mtp.depth  # module k's states at positions 0..c_k-1
        self.committed = [0] * mtp.depth  # c_k

    def draft(self, states: torch.Tensor, tokens: list[int], n: int, vocab_limit: int | None) -> list[int]:
        """`n` <= depth drafts after tokens t_0..t_m; `states` (1, m, D) the model's h^0 at
        positions 0..m-1."""
        m = len(tokens) - 1
        device = states.device
        drafts: list[int] = []
        below = states  # the previous depth's states at positions 0..m-1
        for k, layer in enumerate(self.mtp.layers[:n], start=1):
            c = self.committed[k - 1]
            ids = [tokens[i + k] if i + k <= m else drafts[i + k - m - 1] for i in range(c, m)]
            embedded = self.model.embed_tokens(torch.tensor([ids], device=device))  # (1, m-c, D)
            positions = torch.arange(c, m, device=device)[None]  # (1, m-c)
            out = layer(
                below[:, c:m], embedded, positions=positions, position=self.position, cache=self.caches[k - 1]
            )  # (1, m-c, D)
            drafts.append(int(_greedy(self.model.logits(out[:, -1:]), vocab_limit)[0, 0]))
            keep = max(c, m - k + 1)  # positions i <= m-k read known tokens only
            kept = self.kept[k - 1]
            new = out[:, : keep - c]
            whole = new if kept is None else torch.cat([kept, new], dim=1)  # (1, keep, D)
            self.kept[k - 1], self.committed[k - 1] = whole, keep
            _truncate(self.caches[k - 1], keep)
            below = torch.cat([whole[:, :keep], out[:, keep - c :]], dim=1)  # (1, m, D) positions 0..m-1
        return drafts


@torch.no_grad()
def speculative_row(
    model: ZooModel,
    mtp: MultiTokenPrediction,
    prompt: torch.Tensor,
    *,
    max_new_tokens: int,
    eos_id: int | None = None,
    vocab_limit: int | None = None,
    on_token=None,
) -> tuple[list[int], SpeculativeStats]:
    """Greedy continuation of one prompt (P,) (no padding), drafted by `mtp` and verified by
    `model`: up to max_new_tokens new ids, ending with eos_id if it came; and what it did."""
    check_speculative(model, mtp)
    stats = SpeculativeStats(per_depth=[0] * mtp.depth, drafted_by_depth=[0] * mtp.depth)
    cache = model.new_cache()
    states = model(prompt[None], cache=cache, use_cache=True, return_logits=False).hidden_states  # (1, P, D)
    tokens = prompt.tolist()
    new = [int(_greedy(model.logits(states[:, -1:]), vocab_limit)[0, 0])]
    tokens.append(new[0])
    if on_token is not None:
        on_token(new[0])
    drafter = _Drafter(model, mtp)
    while len(new) < max_new_tokens and (eos_id is None or new[-1] != eos_id):
        m = len(tokens) - 1
        drafts = drafter.draft(states, tokens, min(mtp.depth, max_new_tokens - len(new) - 1), vocab_limit)
        fed = torch.tensor([[tokens[m], *drafts]], device=prompt.device)  # (1, 1 + n)
        out = model(fed, cache=cache, use_cache=True, return_logits=False).hidden_states  # (1, 1 + n, D)
        choices = _greedy(model.logits(out), vocab_limit)[0].tolist()  # g_{m+1}..g_{m+n+1}
        accepted = 0
        while accepted < len(drafts) and drafts[accepted] == choices[accepted]:
            accepted += 1
        stats.rounds += 1
        stats.drafted += len(drafts)
        stats.accepted += accepted
        for k in range(len(drafts)):
            stats.drafted_by_depth[k] += 1
            stats.per_depth[k] += int(k < accepted)
        added = choices[: accepted + 1]
        if eos_id is not None and eos_id in added:
            added = added[: added.index(eos_id) + 1]
        added = added[: max_new_tokens - len(new)]
        new.extend(added)
        tokens.extend(added)
        states = torch.cat([states, out[:, : accepted + 1]], dim=1)  # h^0 at positions 0..m+accepted
        _truncate(cache, m + accepted + 1)
        if on_token is not None:
            for token in added:
                on_token(token)
    stats.tokens = len(new)
    return new, stats


def speculative_generate(
    model: ZooModel,
    mtp: MultiTokenPrediction,
    input_ids: torch.Tensor,
    *,
    attention_mask: torch.Tensor | None = None,
    max_new_tokens: int,
    eos_id: int | None = None,
    pad_id: int = 0,
    vocab_limit: int | None = None,
    on_step=None,
) -> tuple[torch.Tensor, SpeculativeStats]:
    """`zoo.models.generate.generate`'s greedy output for left-padded prompts (B, T), each row
    decoded by `speculative_row`: new tokens (B, N), pad_id after a row's eos_id; and the
    rounds' counts over all rows. `on_step` gets each new token (1,) of a single row."""
    was_training = model.training
    model.eval()
    try:
        rows, total = [], SpeculativeStats()
        for b in range(input_ids.shape[0]):
            prompt = input_ids[b] if attention_mask is None else input_ids[b][attention_mask[b].bool()]
            on_token = None
            if on_step is not None and input_ids.shape[0] == 1:

                def on_token(token: int) -> None:
                    on_step(torch.tensor([token], device=input_ids.device))

            row, stats = speculative_row(
                model,
                mtp,
                prompt,
                max_new_tokens=max_new_tokens,
                eos_id=eos_id,
                vocab_limit=vocab_limit,
                on_token=on_token,
            )
            rows.append(row)
            total.add(stats)
    finally:
        model.train(was_training)
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), pad_id, dtype=torch.long, device=input_ids.device)
    for b, row in enumerate(rows):
        out[b, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out, total
